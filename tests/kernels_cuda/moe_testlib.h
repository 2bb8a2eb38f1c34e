// The routed experts' inputs the experts tests share (moe_fp8_test, moe_mx_test, moe_fp4_test):
// token rows, each token's expert ids and routing weights, on the host and in device tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "kernels_cuda/cuda_testlib.h"

namespace fission::kernels::cuda::testing {

// top_k distinct experts a token over all but the last (which never gets a token), ascending;
// with `repeats`, every third token takes its first expert twice.
std::vector<std::int32_t> DrawExpertIds(std::int64_t n, std::int64_t experts, std::int64_t top_k, bool repeats,
                                        std::mt19937& rng);

// The host (reference) or device views of a set of experts' weights (W: a test's weight holder
// with host() and device() views).
template <typename W>
std::vector<WeightView> ViewsOf(const std::vector<std::unique_ptr<W>>& weights, bool device) {
  std::vector<WeightView> v;
  for (const auto& w : weights) v.push_back(device ? w->device() : w->host());
  return v;
}

struct RoutedInputs {
  std::vector<float> x, weights;
  std::vector<std::int32_t> ids;
  // x random (rounded to bf16 when `bf16`), then the ids `draw_ids` makes, then weights in [0.05, 1).
  RoutedInputs(std::int64_t n, std::int64_t hidden, std::int64_t top_k, bool bf16, std::mt19937& rng,
               const std::function<std::vector<std::int32_t>()>& draw_ids);
  // The CPU reference's experts over these rows (kernels/cpu: MoeExperts with the clamp `limit`).
  std::vector<float> CpuExperts(std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit);

  std::int64_t n, hidden, top_k;
};

// Plain routed experts: gate_up [2·inter, hidden] and down [hidden, inter] of random values (scaled
// by gate_up_scale and down_scale, rounded to bf16 for bf16 weights), kept on the host for the
// CPU reference and on the device in `wtype`.
struct PlainExperts {
  PlainExperts(std::int64_t experts, std::int64_t hidden, std::int64_t inter, DType wtype, float gate_up_scale,
               float down_scale, std::mt19937& rng);
  std::vector<WeightView> HostGateUp() { return PlainWeights(host_gate_up); }
  std::vector<WeightView> HostDown() { return PlainWeights(host_down); }
  std::vector<WeightView> DeviceGateUp() { return PlainWeights(device_gate_up); }
  std::vector<WeightView> DeviceDown() { return PlainWeights(device_down); }

  std::vector<std::vector<float>> gate_up, down;
  std::vector<Buffer> gate_up_buffers, down_buffers;
  std::vector<Tensor> host_gate_up, host_down, device_gate_up, device_down;
};

// The same inputs in device tensors the GPU operation reads (refilled in place by Load), and a
// poisoned output.
struct RoutedDeviceInputs {
  Buffer x, ids, weights, out;
  RoutedDeviceInputs(DType xtype, std::int64_t n, std::int64_t hidden, std::int64_t top_k, const RoutedInputs& in);
  void Load(const RoutedInputs& in);
};

}  // namespace fission::kernels::cuda::testing
