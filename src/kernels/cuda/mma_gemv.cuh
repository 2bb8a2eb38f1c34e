// Pieces of the tensor-core GEMVs (fp8.cu, gemv_bf16.cu, moe_mx.cu; the indexer's scores in
// dsa_indexer.cu use the e4m3 MMA too).
//
// MmaE4m3: one mma.sync m16n8k32 e4m3 x e4m3 -> fp32, accumulating into d.
//
// StoreMmaTile, the GEMVs' epilogue: each of a block's kWarps warps
// holds an m16n8 accumulator for the same 16 weight rows and up to 8 tokens over its share of k;
// warp 0 adds them in warp order (a fixed order, so results do not depend on timing) and stores
// rows row0 + gid and row0 + gid + 8 of tokens 2t and 2t + 1 into out rows out_row0 + token.
#pragma once

#include "kernels/cuda/cuda_common.cuh"

namespace fission::kernels::cuda {

__device__ __forceinline__ void MmaE4m3(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                        std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <int kWarps>
__device__ __forceinline__ void StoreMmaTile(const float (&acc)[4], std::int64_t n, std::int64_t m,
                                             std::int64_t row0, void* out, std::int64_t out_row0, Elem oe) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  __shared__ float partial[kWarps][32][4];
#pragma unroll
  for (int i = 0; i < 4; ++i) partial[warp][lane][i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float sum[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    sum[i] = partial[0][lane][i];
    for (int v = 1; v < kWarps; ++v) sum[i] += partial[v][lane][i];
  }
  // Accumulator layout: c0, c1 are row gid for tokens 2t, 2t + 1; c2, c3 row gid + 8.
  const std::int64_t ra = row0 + gid, rb = ra + 8, t0 = 2 * t, t1 = 2 * t + 1;
  if (ra < m && t0 < n) StoreF(out, (out_row0 + t0) * m + ra, oe, sum[0]);
  if (ra < m && t1 < n) StoreF(out, (out_row0 + t1) * m + ra, oe, sum[1]);
  if (rb < m && t0 < n) StoreF(out, (out_row0 + t0) * m + rb, oe, sum[2]);
  if (rb < m && t1 < n) StoreF(out, (out_row0 + t1) * m + rb, oe, sum[3]);
}

}  // namespace fission::kernels::cuda
