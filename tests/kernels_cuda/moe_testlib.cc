#include "kernels_cuda/moe_testlib.h"

#include <algorithm>

#include "kernels/cpu/cpu_ops.h"

namespace fission::kernels::cuda::testing {

std::vector<std::int32_t> DrawExpertIds(std::int64_t n, std::int64_t experts, std::int64_t top_k, bool repeats,
                                        std::mt19937& rng) {
  std::vector<std::int32_t> ids, pool;
  for (std::int64_t e = 0; e < experts - 1; ++e) pool.push_back(static_cast<std::int32_t>(e));
  for (std::int64_t t = 0; t < n; ++t) {
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<std::int32_t> chosen(pool.begin(), pool.begin() + top_k);
    if (repeats && t % 3 == 0) chosen[1] = chosen[0];
    std::sort(chosen.begin(), chosen.end());
    ids.insert(ids.end(), chosen.begin(), chosen.end());
  }
  return ids;
}

RoutedInputs::RoutedInputs(std::int64_t n, std::int64_t hidden, std::int64_t top_k, bool bf16, std::mt19937& rng,
                           const std::function<std::vector<std::int32_t>()>& draw_ids)
    : x(Random(n * hidden, rng)), weights(n * top_k), n(n), hidden(hidden), top_k(top_k) {
  if (bf16) x = RoundBf16(x);
  ids = draw_ids();
  std::uniform_real_distribution<float> u(0.05f, 1.0f);
  for (float& w : weights) w = u(rng);
}

PlainExperts::PlainExperts(std::int64_t experts, std::int64_t hidden, std::int64_t inter, DType wtype,
                           float gate_up_scale, float down_scale, std::mt19937& rng)
    : gate_up(experts), down(experts) {
  for (std::int64_t e = 0; e < experts; ++e) {
    gate_up[e] = Random(2 * inter * hidden, rng, gate_up_scale);
    down[e] = Random(hidden * inter, rng, down_scale);
    if (wtype == DType::kBF16) {
      gate_up[e] = RoundBf16(gate_up[e]);
      down[e] = RoundBf16(down[e]);
    }
  }
  // Views once every vector is in place (the host views point into them).
  for (std::int64_t e = 0; e < experts; ++e) {
    host_gate_up.push_back(HostView(gate_up[e], Shape{2 * inter, hidden}));
    host_down.push_back(HostView(down[e], Shape{hidden, inter}));
    gate_up_buffers.push_back(ToDevice(wtype, Shape{2 * inter, hidden}, gate_up[e]));
    down_buffers.push_back(ToDevice(wtype, Shape{hidden, inter}, down[e]));
    device_gate_up.push_back(gate_up_buffers.back());
    device_down.push_back(down_buffers.back());
  }
}

std::vector<float> RoutedInputs::CpuExperts(std::span<const WeightView> gate_up, std::span<const WeightView> down,
                                            float limit) {
  Tensor host_ids;
  host_ids.data = ids.data();
  host_ids.dtype = DType::kI32;
  host_ids.shape = Shape{n, top_k};
  std::vector<float> ref(n * hidden);
  cpu::MoeExperts(HostView(x, Shape{n, hidden}), host_ids, HostView(weights, Shape{n, top_k}), gate_up, down, limit,
                  HostView(ref, Shape{n, hidden}));
  return ref;
}

RoutedDeviceInputs::RoutedDeviceInputs(DType xtype, std::int64_t n, std::int64_t hidden, std::int64_t top_k,
                                       const RoutedInputs& in)
    : x(ToDevice(xtype, Shape{n, hidden}, in.x)),
      ids(ToDevice(DType::kI32, Shape{n, top_k}, std::vector<float>(in.ids.begin(), in.ids.end()))),
      weights(ToDevice(DType::kF32, Shape{n, top_k}, in.weights)),
      out(Poisoned(DType::kF32, Shape{n, hidden})) {}

void RoutedDeviceInputs::Load(const RoutedInputs& in) {
  Gpu().CopyFromHost(in.x.data(), x);
  const std::vector<float> idsf(in.ids.begin(), in.ids.end());
  Gpu().CopyFromHost(idsf.data(), ids);
  Gpu().CopyFromHost(in.weights.data(), weights);
}

}  // namespace fission::kernels::cuda::testing
