// fp32 Linear for decode-sized calls: out[n, m] = x[n, k] · w[m, k]ᵀ with fp32 weights, in fp32
// (the DeepSeek routers, which checkpoints store in fp32; every Linear of an fp32 model).
// cuBLASLt's fp32 GEMM reads a [256, 4096] router for one token at about 60 GB/s (66 µs on the
// H200); this reads each weight row once per 8 tokens with 16-byte loads spread over a block.
//
// A block of kWarps warps per (weight row, group of 8 tokens): warp w takes the float4 chunks w,
// w + kWarps, ... of the row, each lane every 32nd of those, and keeps one sum per token; lane
// sums are added by a fixed shuffle tree and the warps' in warp order, so a token's result does
// not depend on the other tokens of the step (nor on timing) anywhere in the kernel's range. The
// x rows and the weight row are read by many blocks: L2 serves them after the first. Up to
// kDeviceRoutedTokens tokens: with 64 tokens the tiled kernel of gemm_f32.cu ran a [64, 2048]
// router as one block (92 µs a layer on an H100); this runs 512 blocks. k % 4 == 0 and 16-byte
// aligned rows.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kTokens = 8, kWarps = 4;

__global__ void __launch_bounds__(kWarps * 32) F32GemvKernel(const float* x, int n, const float* w, std::int64_t k,
                                                             void* out, Elem oe, std::int64_t m) {
  __shared__ float partial[kWarps][kTokens];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t row = blockIdx.x, chunks = k / 4, t0 = static_cast<std::int64_t>(blockIdx.y) * kTokens;
  // This block's tokens: x and out rows from t0, n of them.
  x += t0 * k;
  out = static_cast<char*>(out) + t0 * m * (oe == Elem::kF32 ? sizeof(float) : sizeof(__nv_bfloat16));
  n = static_cast<int>(n - t0 < kTokens ? n - t0 : kTokens);
  const auto* w4 = reinterpret_cast<const float4*>(w + row * k);
  float acc[kTokens];
#pragma unroll
  for (int t = 0; t < kTokens; ++t) acc[t] = 0.0f;
#pragma unroll 4
  for (std::int64_t c = warp * 32 + lane; c < chunks; c += kWarps * 32) {
    const float4 wv = __ldg(w4 + c);
#pragma unroll
    for (int t = 0; t < kTokens; ++t) {
      if (t >= n) break;
      const float4 xv = __ldg(reinterpret_cast<const float4*>(x + t * k) + c);
      acc[t] = fmaf(wv.x, xv.x, fmaf(wv.y, xv.y, fmaf(wv.z, xv.z, fmaf(wv.w, xv.w, acc[t]))));
    }
  }
#pragma unroll
  for (int t = 0; t < kTokens; ++t)
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], o);
  if (lane == 0)
#pragma unroll
    for (int t = 0; t < kTokens; ++t) partial[warp][t] = acc[t];
  __syncthreads();
  if (threadIdx.x < n) {
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarps; ++i) sum += partial[i][threadIdx.x];
    StoreF(out, threadIdx.x * m + row, oe, sum);
  }
}

}  // namespace

bool F32GemvTakes(const Tensor& x, const Tensor& w, const Tensor& out) {
  const std::int64_t k = w.shape[1], n = x.numel() / k;
  return w.dtype == DType::kF32 && x.dtype == DType::kF32 && (out.dtype == DType::kF32 || out.dtype == DType::kBF16) &&
         n >= 1 && n <= kDeviceRoutedTokens && k % 4 == 0 && Aligned16(x.data) && Aligned16(w.data);
}

void F32Gemv(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  FISSION_CHECK(F32GemvTakes(x, w, out) && m < (std::int64_t{1} << 31), "F32Gemv: x", x.shape.ToString(), " w",
                w.shape.ToString(), " out", out.shape.ToString());
  const dim3 grid(static_cast<unsigned>(m), static_cast<unsigned>((n + kTokens - 1) / kTokens));
  F32GemvKernel<<<grid, kWarps * 32, 0, ctx.stream()>>>(x.ptr<float>(), static_cast<int>(n), w.ptr<float>(), k,
                                                       out.data, ElemOf(out), m);
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
