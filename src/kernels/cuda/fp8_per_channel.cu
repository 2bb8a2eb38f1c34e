// ptpc_fp8 (WeightFormat::Fp8PerChannel): e4m3 weights with one fp32 scale per output row and
// activations quantized per token over the whole row. The product factors as
//   out[t, j] = s_x[t] · s_w[j] · Σ_k xq[t, k] · wq[j, k],
// so it runs on LinearFp8's paths (the tensor-core GEMV up to 8 tokens, cuBLASLt's block-scaled
// GEMM, the tiled kernel) with the token's scale in every 128-group slot and unit weight block
// scales, and the weight's row scales multiply the fp32 result. The CPU reference decodes both
// sides and sums their products (cpu_quantized.cc): the same value up to the order of roundings.
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace fission::kernels::cuda {
namespace {

__global__ void FillKernel(float* x, std::int64_t n, float value) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = value;
}

// out[t, j] = acc[t, j] · row_scale[j] over n tokens of m outputs.
__global__ void ScaleColumnsKernel(const float* acc, const float* row_scale, std::int64_t n, std::int64_t m, void* out,
                                   Elem oe) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < n * m) StoreF(out, i, oe, acc[i] * row_scale[i % m]);
}

std::int64_t Ceil(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

void CheckPerChannel(const Tensor& w, const Tensor& w_scale, const char* what) {
  FISSION_CHECK(w.dtype == DType::kF8E4M3 && w.rank() == 2 && w_scale.dtype == DType::kF32 &&
                    w_scale.numel() == w.shape[0],
                what, ": per-channel FP8 takes e4m3 weights [m, k] with m fp32 row scales, got ", DTypeName(w.dtype),
                w.shape.ToString(), " with ", DTypeName(w_scale.dtype), w_scale.shape.ToString());
}

}  // namespace

void LinearFp8PerChannel(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) {
  CheckPerChannel(w, w_scale, "LinearFp8PerChannel");
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m, "LinearFp8PerChannel shapes x", x.shape.ToString(), " w",
                w.shape.ToString(), " out", out.shape.ToString());
  if (n == 0) return;
  Buffer unit(DType::kF32, Shape{Ceil(m, 128), Ceil(k, 128)}, ctx.allocator());
  FillKernel<<<Blocks(unit.tensor().numel(), 256), 256, 0, ctx.stream()>>>(unit.ptr<float>(), unit.tensor().numel(),
                                                                          1.0f);
  FISSION_LAUNCHED();
  Buffer acc(DType::kF32, Shape{n, m}, ctx.allocator());
  LinearFp8(ctx, x, w, unit, acc, Fp8Activations::kPerToken);
  ScaleColumnsKernel<<<Blocks(n * m, 256), 256, 0, ctx.stream()>>>(acc.ptr<float>(), w_scale.ptr<float>(), n, m,
                                                                  out.data, ElemOf(out));
  FISSION_LAUNCHED();
}

// The host-planned permutation (counts read back, so a step with these experts runs eagerly), then
// each active expert's rows through LinearFp8PerChannel; products and silu·up in fp32 as the CPU's.
void MoeExpertsFp8PerChannel(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                             std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                             std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out,
                             float limit) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  const int experts = static_cast<int>(gate_up.size());
  FISSION_CHECK(experts > 0 && down.size() == gate_up.size() && gate_up_scale.size() == gate_up.size() &&
                    down_scale.size() == down.size() && topk_ids.dtype == DType::kI32 && topk_ids.rank() == 2 &&
                    topk_ids.shape[0] == n && topk_weights.dtype == DType::kF32 &&
                    topk_weights.shape == topk_ids.shape && out.numel() == n * hidden,
                "MoeExpertsFp8PerChannel arguments");
  const std::int64_t inter = down[0].shape[1];
  for (int e = 0; e < experts; ++e) {
    CheckPerChannel(gate_up[e], gate_up_scale[e], "MoeExpertsFp8PerChannel gate_up");
    CheckPerChannel(down[e], down_scale[e], "MoeExpertsFp8PerChannel down");
    FISSION_CHECK(gate_up[e].shape[0] == 2 * inter && gate_up[e].shape[1] == hidden && down[e].shape[0] == hidden &&
                      down[e].shape[1] == inter,
                  "MoeExpertsFp8PerChannel: expert ", e, " gate_up ", gate_up[e].shape.ToString(), " down ",
                  down[e].shape.ToString());
  }
  if (n == 0) return;
  const ExpertRows rows = PermuteByExpert(ctx, topk_ids, experts);
  Buffer xp(x.dtype, Shape{rows.pairs, hidden}, ctx.allocator()),
      gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kF32, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GatherRowsDevice(ctx, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs, xp);
  auto products = [&](const Tensor& in, std::span<const Tensor> w, std::span<const Tensor> s, const Tensor& o) {
    for (int e = 0; e < experts; ++e) {
      const std::int64_t begin = rows.offsets[e], end = rows.offsets[e + 1];
      if (begin < end) LinearFp8PerChannel(ctx, in.Rows(begin, end), w[e], s[e], o.Rows(begin, end));
    }
  };
  products(xp, gate_up, gate_up_scale, gu);
  SiluMul(ctx, gu, act, limit);
  products(act, down, down_scale, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace fission::kernels::cuda
