// MoE routing and routed experts: CUDA against the CPU reference.
#include "kernels/cuda/cuda_backend.h"
#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/moe_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

std::vector<std::int32_t> IdsToHost(const Tensor& t) {
  std::vector<std::int32_t> v(t.numel());
  Gpu().CopyBytesToHost(t, v.data());
  return v;
}

TEST(CudaMoe, RouteMatchesCpuIdsAndWeights) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(20);
  MoeRouting v3{256, 8, 8, 4, true, 2.5f};     // DeepSeek-V3
  MoeRouting flat{64, 6, 1, 1, false, 1.0f};    // no groups, no renormalisation
  MoeRouting small{16, 4, 4, 2, true, 1.0f};    // tiny test checkpoints' shape
  MoeRouting shared = small;                    // two shared experts appended (Moonlight's count)
  shared.shared_experts = 2;
  for (const MoeRouting& r : {v3, flat, small, shared})
    for (int n : {1, 17, 513}) {
      const std::int64_t columns = r.top_k + r.shared_experts;
      auto logits = Random(n * r.num_experts, rng, 2.0f);
      auto bias = Random(r.num_experts, rng, 0.1f);
      std::vector<float> ref_w(n * columns);
      std::vector<std::int32_t> ref_ids(n * columns);
      Tensor hid;
      hid.data = ref_ids.data();
      hid.dtype = DType::kI32;
      hid.shape = Shape{n, columns};
      Cpu().MoeRoute(HostView(logits, Shape{n, r.num_experts}), HostView(bias, Shape{r.num_experts}), r, hid,
                     HostView(ref_w, Shape{n, columns}));
      Buffer dl = ToDevice(DType::kF32, Shape{n, r.num_experts}, logits),
             db = ToDevice(DType::kF32, Shape{r.num_experts}, bias),
             ids = ToDevice(DType::kI32, Shape{n, columns}, std::vector<float>(n * columns, -1.0f)),
             w = Poisoned(DType::kF32, Shape{n, columns});
      Gpu().MoeRoute(dl, db, r, ids, w);
      EXPECT_EQ(IdsToHost(ids), ref_ids) << r.num_experts << " experts, n=" << n;
      EXPECT_LT(RelErr(ToHost(w), ref_w), 1e-5) << r.num_experts << " experts, n=" << n;
    }
}

TEST(CudaMoe, ExpertsMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(21);
  for (DType wtype : {DType::kF32, DType::kBF16})
    for (auto [n, experts, top_k, hidden, inter] : {std::tuple{1, 8, 2, 256, 128}, {37, 16, 4, 512, 256},
                                                    {300, 64, 6, 384, 96}}) {
      auto x = Random(n * hidden, rng);
      if (wtype == DType::kBF16) x = RoundBf16(x);
      PlainExperts ex(experts, hidden, inter, wtype, 0.05f, 0.05f, rng);
      // Distinct experts per token, some experts left without tokens.
      std::vector<std::int32_t> ids(n * top_k);
      std::vector<float> idsf(n * top_k), weights(n * top_k);
      std::uniform_real_distribution<float> u(0.05f, 1.0f);
      for (int t = 0; t < n; ++t) {
        std::vector<int> pool(experts - 1);
        for (int e = 0; e < experts - 1; ++e) pool[e] = e;  // the last expert never gets a token
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int k = 0; k < top_k; ++k) {
          ids[t * top_k + k] = pool[k];
          idsf[t * top_k + k] = static_cast<float>(pool[k]);
          weights[t * top_k + k] = u(rng);
        }
      }
      Tensor hids;
      hids.data = ids.data();
      hids.dtype = DType::kI32;
      hids.shape = Shape{n, top_k};
      std::vector<float> ref(n * hidden);
      Cpu().MoeExperts(HostView(x, Shape{n, hidden}), hids, HostView(weights, Shape{n, top_k}), ex.HostGateUp(),
                       ex.HostDown(), HostView(ref, Shape{n, hidden}));
      Buffer dx = ToDevice(wtype, Shape{n, hidden}, x), did = ToDevice(DType::kI32, Shape{n, top_k}, idsf),
             dwt = ToDevice(DType::kF32, Shape{n, top_k}, weights), out = Poisoned(DType::kF32, Shape{n, hidden});
      Gpu().MoeExperts(dx, did, dwt, ex.DeviceGateUp(), ex.DeviceDown(), out);
      EXPECT_LT(RelErr(ToHost(out), ref), wtype == DType::kF32 ? kF32Gemm : kBf16)
          << DTypeName(wtype) << " n=" << n << " experts=" << experts;
    }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
