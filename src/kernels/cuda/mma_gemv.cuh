// Pieces of the tensor-core GEMVs (fp8.cu, gemv_bf16.cu, moe_mx.cu, moe_fp4.cu; the indexer's
// scores in dsa_indexer.cu and the experts' grouped GEMMs in moe_grouped.cu use the MMAs too).
//
// MmaE4m3: one mma.sync m16n8k32 e4m3 x e4m3 -> fp32, accumulating into d (sm_90 has no e4m3
// mma.sync of its own: it compiles to e4m3 -> f16 conversions of both operands and two f16 MMAs;
// only wgmma multiplies e4m3 natively). MmaBf16: one mma.sync m16n8k16 bf16 x bf16 -> fp32. Bf16Pair / LoadBf16x8: activations
// as packed bf16 pairs (fp32 rounded to nearest even, or bf16 as stored). Prmt: the byte permute.
//
// StoreMmaTile, the GEMVs' epilogue: each of a block's kWarps warps holds an m16n8 accumulator
// for 16 weight rows and up to 8 tokens over its share of k. kSplit warps share a tile (by
// default all of them): warp w has tile w / kSplit, rows row0 + 16 (w / kSplit), and the first
// warp of each tile adds its warps' sums in warp order (a fixed order, so results do not depend on
// timing) and stores rows gid and gid + 8 of the tile for tokens 2t and 2t + 1 into out rows
// out_row0 + token.
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

// A: a0 = row gid, k slots 2t, 2t + 1; a1 = row gid + 8, the same slots; a2, a3 = slots 2t + 8,
// 2t + 9 of rows gid and gid + 8. B: b0 = slots 2t, 2t + 1 of column gid; b1 = slots 2t + 8, 2t + 9.
__device__ __forceinline__ void MmaBf16(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                        std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t Prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Two values rounded to bf16, `lo` in the low half (the lower address).
__device__ __forceinline__ std::uint32_t Bf16Pair(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Values [i, i + 8) of fp32 (kF32) or bf16 activations `x` as four packed bf16 pairs in order
// (16-byte aligned); zeros when !ok.
template <bool kF32>
__device__ __forceinline__ uint4 LoadBf16x8(const void* x, std::int64_t i, bool ok) {
  if (!ok) return make_uint4(0, 0, 0, 0);
  if constexpr (kF32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(x) + i);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    return make_uint4(Bf16Pair(a.x, a.y), Bf16Pair(a.z, a.w), Bf16Pair(b.x, b.y), Bf16Pair(b.z, b.w));
  } else {
    return __ldg(reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(x) + i));
  }
}

template <int kWarps, int kSplit = kWarps>
__device__ __forceinline__ void StoreMmaTile(const float (&acc)[4], std::int64_t n, std::int64_t m,
                                             std::int64_t row0, void* out, std::int64_t out_row0, Elem oe) {
  static_assert(kSplit >= 1 && kWarps % kSplit == 0, "a tile's warps are consecutive");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  float sum[4];
  if constexpr (kSplit == 1) {
#pragma unroll
    for (int i = 0; i < 4; ++i) sum[i] = acc[i];
  } else {
    __shared__ float partial[kWarps][32][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) partial[warp][lane][i] = acc[i];
    __syncthreads();
    // One tile (the default): warp 0 adds and stores, as written for it.
    constexpr bool kOneTile = kSplit == kWarps;
    if (kOneTile ? warp != 0 : warp % kSplit != 0) return;
    const int first = kOneTile ? 0 : warp;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sum[i] = partial[first][lane][i];
      for (int v = 1; v < kSplit; ++v) sum[i] += partial[first + v][lane][i];
    }
  }
  // Accumulator layout: c0, c1 are row gid for tokens 2t, 2t + 1; c2, c3 row gid + 8.
  const std::int64_t tile_row0 = kSplit == kWarps ? row0 : row0 + 16 * (warp / kSplit);
  const std::int64_t ra = tile_row0 + gid, rb = ra + 8, t0 = 2 * t, t1 = 2 * t + 1;
  if (ra < m && t0 < n) StoreF(out, (out_row0 + t0) * m + ra, oe, sum[0]);
  if (ra < m && t1 < n) StoreF(out, (out_row0 + t1) * m + ra, oe, sum[1]);
  if (rb < m && t0 < n) StoreF(out, (out_row0 + t0) * m + rb, oe, sum[2]);
  if (rb < m && t1 < n) StoreF(out, (out_row0 + t1) * m + rb, oe, sum[3]);
}

}  // namespace fission::kernels::cuda
