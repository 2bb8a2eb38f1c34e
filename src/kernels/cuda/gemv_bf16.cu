// bf16 Linear for a few tokens (decode): out[n, m] = x[n, k] · w[m, k]ᵀ with bf16 weights on the
// tensor cores (mma.sync m16n8k16, bf16 × bf16 → fp32), a warp per 16 output rows and up to 8
// tokens as the MMA's 8 columns. cuBLASLt reads a large weight at 1.3–1.9 TB/s for one token (the
// 1.85 GB lm_head took 1 ms); this reads each weight once, 32 contiguous bytes per lane and row.
//
// The dot product's k order is free, so within every 64-wide chunk of k a lane (gid, t) takes the
// 16 values [16t, 16t + 16) of its rows gid and gid + 8 and of token gid, and MMA j of the chunk
// multiplies values [4j, 4j + 4) of every lane's piece: A's and B's fragments then pair the same
// physical elements, and every element of the chunk is used once. The block's warps split the
// chunks; their sums are added in warp order (a fixed order: results do not depend on timing).
// Activations may be fp32 (converted in registers) or bf16; k % 8 == 0, 16-byte aligned rows.
// Bf16GemvRuns runs the same tiles over the routed experts' device-listed runs (moe.cu).
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma_gemv.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kTokens = 8, kRows = 16, kChunk = 64;
// Warps per block: 4, or 16 when the rows are few (a narrow weight would leave multiprocessors idle
// and each warp a long serial walk over k).
constexpr int kWideWarps = 4, kNarrowWarps = 16;

__device__ __forceinline__ uint4 LoadW(const __nv_bfloat16* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// One block's 16 weight rows [row0, row0 + 16) for up to 8 tokens `x` (rows of k values), stored
// into out rows out_row0 + token.
template <bool kF32, int kWarps>
__device__ __forceinline__ void Bf16MmaTile(const void* x, std::int64_t n, const __nv_bfloat16* w, std::int64_t m,
                                            std::int64_t k, std::int64_t row0, void* out, std::int64_t out_row0,
                                            Elem oe) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  const std::int64_t ra = row0 + gid, rb = ra + 8;
  const bool has_a = ra < m, has_b = rb < m, has_x = gid < n;
  const __nv_bfloat16* wa = w + ra * k;
  const __nv_bfloat16* wb = w + rb * k;
  const std::int64_t xrow = gid * k, chunks = (k + kChunk - 1) / kChunk;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
  for (std::int64_t c = warp; c < chunks; c += kWarps) {
    const std::int64_t at = c * kChunk + 16 * t;
    const bool lo = at < k, hi = at + 8 < k;
    const uint4 a0 = LoadW(wa + at, has_a && lo), a1 = LoadW(wa + at + 8, has_a && hi);
    const uint4 b0 = LoadW(wb + at, has_b && lo), b1 = LoadW(wb + at + 8, has_b && hi);
    const uint4 x0 = LoadBf16x8<kF32>(x, xrow + at, has_x && lo), x1 = LoadBf16x8<kF32>(x, xrow + at + 8, has_x && hi);
    MmaBf16(d, a0.x, b0.x, a0.y, b0.y, x0.x, x0.y);
    MmaBf16(d, a0.z, b0.z, a0.w, b0.w, x0.z, x0.w);
    MmaBf16(d, a1.x, b1.x, a1.y, b1.y, x1.x, x1.y);
    MmaBf16(d, a1.z, b1.z, a1.w, b1.w, x1.z, x1.w);
  }
  StoreMmaTile<kWarps>(d, n, m, row0, out, out_row0, oe);
}

template <bool kF32, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 16 / kWarps) Bf16GemvKernel(const void* x, std::int64_t n,
                                                              const __nv_bfloat16* w, std::int64_t m,
                                                              std::int64_t k, void* out, Elem oe) {
  Bf16MmaTile<kF32, kWarps>(x, n, w, m, k, blockIdx.x * static_cast<std::int64_t>(kRows), out, 0, oe);
}

// The routed experts' decode path: blockIdx.y is a run of at most 8 rows of one expert (listed on
// the device, moe.cu), blocks past the listed count return at once, the weight comes from the
// experts' pointer table.
static_assert(kGemvRunRows == kTokens);
template <bool kF32>
__global__ void __launch_bounds__(kWideWarps * 32) Bf16GemvRunsKernel(const void* x, const ExpertRun* runs,
                                                                    const std::int32_t* run_count,
                                                                    const __nv_bfloat16* const* w, std::int64_t m,
                                                                    std::int64_t k, void* out, Elem oe) {
  if (static_cast<std::int32_t>(blockIdx.y) >= *run_count) return;
  const ExpertRun run = runs[blockIdx.y];
  const std::size_t elem = kF32 ? sizeof(float) : sizeof(__nv_bfloat16);
  const void* xr = static_cast<const char*>(x) + static_cast<std::size_t>(run.row0) * k * elem;
  Bf16MmaTile<kF32, kWideWarps>(xr, run.rows, w[run.expert], m, k, blockIdx.x * static_cast<std::int64_t>(kRows), out,
                                run.row0, oe);
}

}  // namespace

bool Bf16GemvTakes(const Tensor& x, const Tensor& w, const Tensor& out) {
  const std::int64_t k = w.shape[1], n = x.numel() / k;
  return w.dtype == DType::kBF16 && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) &&
         (out.dtype == DType::kF32 || out.dtype == DType::kBF16) && n >= 1 && n <= kTokens && k % 8 == 0 &&
         Aligned16(x.data) && Aligned16(w.data);
}

void Bf16Gemv(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  const unsigned blocks = static_cast<unsigned>((m + kRows - 1) / kRows);
  const auto* wp = static_cast<const __nv_bfloat16*>(w.data);
  const bool narrow = blocks < 2u * static_cast<unsigned>(ctx.sm_count());
  const Elem oe = ElemOf(out);
  if (x.dtype == DType::kF32 && narrow) {
    Bf16GemvKernel<true, kNarrowWarps><<<blocks, kNarrowWarps * 32, 0, ctx.stream()>>>(x.data, n, wp, m, k, out.data, oe);
  } else if (x.dtype == DType::kF32) {
    Bf16GemvKernel<true, kWideWarps><<<blocks, kWideWarps * 32, 0, ctx.stream()>>>(x.data, n, wp, m, k, out.data, oe);
  } else if (narrow) {
    Bf16GemvKernel<false, kNarrowWarps><<<blocks, kNarrowWarps * 32, 0, ctx.stream()>>>(x.data, n, wp, m, k, out.data, oe);
  } else {
    Bf16GemvKernel<false, kWideWarps><<<blocks, kWideWarps * 32, 0, ctx.stream()>>>(x.data, n, wp, m, k, out.data, oe);
  }
  FISSION_LAUNCHED();
}

bool Bf16GemvRunsTakes(std::int64_t k, std::span<const Tensor> w) {
  if (k % 8 != 0) return false;
  for (const Tensor& t : w)
    if (t.dtype != DType::kBF16 || t.rank() != 2 || t.shape[1] != k || !Aligned16(t.data)) return false;
  return true;
}

void Bf16GemvRuns(CudaContext& ctx, const Tensor& x, const ExpertRun* runs, const std::int32_t* run_count,
                  std::int64_t max_runs, const void* const* expert_weights, std::int64_t m, const Tensor& out) {
  const auto* w = reinterpret_cast<const __nv_bfloat16* const*>(expert_weights);
  const std::int64_t k = x.shape[-1];
  FISSION_CHECK(k % 8 == 0 && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) && Aligned16(x.data) &&
                    out.shape[-1] == m && out.numel() / m == x.numel() / k,
                "Bf16GemvRuns shapes: x ", x.shape.ToString(), " ", DTypeName(x.dtype), ", m ", m, ", out ",
                out.shape.ToString());
  FISSION_CHECK(max_runs <= kMaxGridY, "Bf16GemvRuns: ", max_runs, " runs do not fit one grid");
  if (max_runs == 0) return;
  const dim3 grid(static_cast<unsigned>((m + kRows - 1) / kRows), static_cast<unsigned>(max_runs));
  if (x.dtype == DType::kF32)
    Bf16GemvRunsKernel<true><<<grid, kWideWarps * 32, 0, ctx.stream()>>>(x.data, runs, run_count, w, m, k, out.data,
                                                                         ElemOf(out));
  else
    Bf16GemvRunsKernel<false><<<grid, kWideWarps * 32, 0, ctx.stream()>>>(x.data, runs, run_count, w, m, k, out.data,
                                                                          ElemOf(out));
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
