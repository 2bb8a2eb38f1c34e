// fp32 Linear for many tokens (prefill): out[n, m] = x[n, k] · w[m, k]ᵀ, fp32 weights and
// activations, fp32 arithmetic on the CUDA cores. cuBLASLt's fp32 GEMM ran DeepSeek-V4's routers
// ([256, 4096] fp32, as checkpoints store them) near 1 TFLOP/s at 4,096 tokens: about 8 ms a layer
// on the H200, a sixth of the prefill.
//
// A block computes a 64 × 64 tile of out (64 tokens, 64 weight rows) over k in steps of 16: both
// operands' 64 × 16 slices go to shared memory transposed (k-major, so a thread reads its four
// tokens' and four rows' values as one float4 each), the next slices' loads in flight meanwhile,
// and each of the 256 threads keeps a 4 × 4 tile of sums in registers. Taken for narrow weights
// (m ≤ kMaxRows), where cuBLASLt's fp32 kernels did worst; wider ones stay on cuBLASLt. Every output adds its k products in order, whatever the batch: a
// token's result does not depend on the other tokens of the step.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kTileN = 64, kTileM = 64, kTileK = 16, kThreads = 256;
constexpr std::int64_t kMaxRows = 512;

// This thread's float4 of the slice [k0, k0 + 16) of `rows` rows from row0 (row stride k): row
// row0 + tid / 4, values k0 + 4·(tid % 4) on; zeros past the rows or k.
__device__ __forceinline__ float4 LoadSlice(const float* src, std::int64_t rows, std::int64_t k, std::int64_t row0,
                                            std::int64_t k0) {
  const std::int64_t row = row0 + threadIdx.x / 4, at = k0 + 4 * (threadIdx.x % 4);
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (row >= rows) return v;
  const float* p = src + row * k + at;
  if (at + 4 <= k && k % 4 == 0) return __ldg(reinterpret_cast<const float4*>(p));
  v.x = at < k ? p[0] : 0.0f;
  v.y = at + 1 < k ? p[1] : 0.0f;
  v.z = at + 2 < k ? p[2] : 0.0f;
  v.w = at + 3 < k ? p[3] : 0.0f;
  return v;
}

// The float4 into shared[kk][r] (k-major).
__device__ __forceinline__ void StoreSlice(const float4& v, float (*dst)[kTileN + 4]) {
  const int r = threadIdx.x / 4, kk = 4 * (threadIdx.x % 4);
  dst[kk][r] = v.x;
  dst[kk + 1][r] = v.y;
  dst[kk + 2][r] = v.z;
  dst[kk + 3][r] = v.w;
}

// The block's 64 × 64 tile; the next slices' loads are in flight while the current one is summed.
__global__ void __launch_bounds__(kThreads) F32GemmKernel(const float* x, std::int64_t n, const float* w,
                                                          std::int64_t m, std::int64_t k, void* out, Elem oe) {
  __shared__ __align__(16) float xs[kTileK][kTileN + 4];
  __shared__ __align__(16) float ws[kTileK][kTileM + 4];
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * kTileM, n0 = static_cast<std::int64_t>(blockIdx.y) * kTileN;
  const int tm = 4 * (threadIdx.x % 16), tn = 4 * (threadIdx.x / 16);
  float acc[4][4] = {};
  float4 xv = LoadSlice(x, n, k, n0, 0), wv = LoadSlice(w, m, k, m0, 0);
  for (std::int64_t k0 = 0; k0 < k; k0 += kTileK) {
    StoreSlice(xv, xs);
    StoreSlice(wv, ws);
    __syncthreads();
    if (k0 + kTileK < k) {
      xv = LoadSlice(x, n, k, n0, k0 + kTileK);
      wv = LoadSlice(w, m, k, m0, k0 + kTileK);
    }
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      const float4 a = *reinterpret_cast<const float4*>(&xs[kk][tn]);
      const float4 b = *reinterpret_cast<const float4*>(&ws[kk][tm]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t token = n0 + tn + i, row = m0 + tm + j;
      if (token < n && row < m) StoreF(out, token * m + row, oe, acc[i][j]);
    }
}

}  // namespace

bool F32GemmTakes(const Tensor& x, const Tensor& w, const Tensor& out) {
  return w.dtype == DType::kF32 && x.dtype == DType::kF32 && (out.dtype == DType::kF32 || out.dtype == DType::kBF16) &&
         w.shape[0] <= kMaxRows && Aligned16(x.data) && Aligned16(w.data);
}

void F32Gemm(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  FISSION_CHECK(F32GemmTakes(x, w, out) && (m + kTileM - 1) / kTileM < (std::int64_t{1} << 31) &&
                    (n + kTileN - 1) / kTileN <= 65535,
                "F32Gemm: x", x.shape.ToString(), " w", w.shape.ToString(), " out", out.shape.ToString());
  const dim3 grid(static_cast<unsigned>((m + kTileM - 1) / kTileM), static_cast<unsigned>((n + kTileN - 1) / kTileN));
  F32GemmKernel<<<grid, kThreads, 0, ctx.stream()>>>(x.ptr<float>(), n, w.ptr<float>(), m, k, out.data, ElemOf(out));
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
