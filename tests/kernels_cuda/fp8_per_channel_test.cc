// ptpc_fp8 (WeightFormat::Fp8PerChannel) on CUDA against the CPU reference (cpu_quantized.cc):
// Linear on every path LinearFp8 takes (the GEMV up to 8 tokens, cuBLASLt on padded batches, the
// tiled kernel for a k with a partial 128-group), fp32 and bf16 activations and outputs, and the
// routed experts (host-planned) with ragged expert loads. Both sides quantize each token's row
// with the same rule, so their codes agree and only the order of roundings differs: kFp8.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <tuple>

#include "kernels_cuda/cuda_testlib.h"
#include "tensor/quantize.h"

namespace fission::kernels::cuda::testing {
namespace {

// A per-channel weight quantized on the host (the CPU's operand) and its device copy.
struct PerChannelWeight {
  QuantizedMatrix host;
  Buffer codes, scales;
  PerChannelWeight(std::int64_t m, std::int64_t k, std::mt19937& rng) {
    std::vector<float> w = Random(m * k, rng, 0.05f);
    for (std::int64_t c = 0; c < k; ++c) w[c] *= 40.0f;  // one row of much larger values: its own scale
    host = QuantizeMatrix(w.data(), m, k, WeightFormat::Fp8PerChannel());
    codes = Buffer(DType::kF8E4M3, Shape{m, k}, Gpu().allocator());
    scales = Buffer(DType::kF32, host.scales.tensor().shape, Gpu().allocator());
    Gpu().CopyBytesFromHost(host.codes.tensor().data, codes);
    Gpu().CopyBytesFromHost(host.scales.tensor().data, scales);
  }
  WeightView Host() const { return WeightView(host.codes.tensor(), host.scales.tensor(), WeightFormat::Fp8PerChannel()); }
  WeightView Device() const { return WeightView(codes.tensor(), scales.tensor(), WeightFormat::Fp8PerChannel()); }
};

TEST(CudaLinearFp8PerChannel, MatchesCpuOnEveryPath) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(91);
  for (auto [n, m, k] : {std::tuple{1, 576, 7168}, {5, 200, 320}, {8, 384, 200}, {9, 1536, 7168}, {33, 384, 1536},
                         {200, 2048, 2048}, {37, 384, 128}}) {
    const PerChannelWeight w(m, k, rng);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      std::vector<float> x = RoundBf16(Random(n * k, rng));
      x[0] = 25.0f;  // a token whose scale one value sets
      std::vector<float> ref(n * m);
      Cpu().Linear(HostView(x, Shape{n, k}), w.Host(), HostView(ref, Shape{n, m}));
      Buffer dx = ToDevice(dtype, Shape{n, k}, x), out = Poisoned(dtype, Shape{n, m});
      Gpu().Linear(dx, w.Device(), out);
      EXPECT_LT(RelErr(ToHost(out), ref), kFp8) << n << "x" << m << "x" << k << " " << DTypeName(dtype);
    }
  }
}

TEST(CudaMoeFp8PerChannel, MatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(92);
  const int experts = 6, top_k = 2;
  const std::int64_t hidden = 256, inter = 128;
  std::vector<PerChannelWeight> gate_up, down;
  for (int e = 0; e < experts; ++e) {
    gate_up.emplace_back(2 * inter, hidden, rng);
    down.emplace_back(hidden, inter, rng);
  }
  std::vector<WeightView> hgu, hdn, dgu, ddn;
  for (int e = 0; e < experts; ++e) {
    hgu.push_back(gate_up[e].Host());
    hdn.push_back(down[e].Host());
    dgu.push_back(gate_up[e].Device());
    ddn.push_back(down[e].Device());
  }
  for (int n : {1, 7, 40}) {
    // Distinct experts per token, never the last one (an expert without rows); expert 0 in most.
    std::vector<std::int32_t> ids;
    for (int t = 0; t < n; ++t) {
      std::vector<std::int32_t> pool(experts - 1);
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin() + 1, pool.end(), rng);
      if (t % 3 == 2) std::swap(pool[0], pool[2]);
      ids.insert(ids.end(), pool.begin(), pool.begin() + top_k);
    }
    std::vector<float> x = RoundBf16(Random(n * hidden, rng)), weights = Random(n * top_k, rng);
    for (float& w : weights) w = 0.5f + 0.25f * w;
    Tensor hids;
    hids.data = ids.data();
    hids.dtype = DType::kI32;
    hids.shape = Shape{n, top_k};
    hids.device = Device::Cpu();
    std::vector<float> ref(n * hidden);
    Cpu().MoeExperts(HostView(x, Shape{n, hidden}), hids, HostView(weights, Shape{n, top_k}), hgu, hdn,
                     HostView(ref, Shape{n, hidden}));
    Buffer dx = ToDevice(DType::kBF16, Shape{n, hidden}, x),
           dids = ToDevice(DType::kI32, Shape{n, top_k}, std::vector<float>(ids.begin(), ids.end())),
           dweights = ToDevice(DType::kF32, Shape{n, top_k}, weights), out = Poisoned(DType::kF32, Shape{n, hidden});
    Gpu().MoeExperts(dx, dids, dweights, dgu, ddn, out);
    EXPECT_LT(RelErr(ToHost(out), ref), kFp8) << n << " tokens";
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
