// The tensor-core core of the attentions over gathered key rows, shared by DeepSeek Sparse
// Attention's latent rows (dsa_sparse_mla.cu: keys of 576 values, values their first 512) and
// DeepSeek-V4's window and compressed entries (v4_flash.cu: one 512-wide row as key and value).
//
// A block of 8 warps owns 64 query rows (heads of one token) and walks tiles of 64 gathered keys
// held in shared memory as bf16, rows XOR-swizzled by 16-byte chunk so that every ldmatrix is
// conflict-free without padding. Warp w = (rg = w % 4, cg = w / 4) owns rows 16·rg .. + 16: for S
// it takes keys 32·cg .. + 32 of the tile (Q·Kᵀ over the row width), the online-softmax maximum is
// exchanged with its partner warp (same rg, other cg) through shared memory and a 64-thread named
// barrier, its probabilities go to the partner the same way while its own stay in registers as the
// A operand; for O it takes value columns 256·cg .. + 256 over all 64 keys (P·V, V being the first
// 512 values of the same rows, ldmatrix.trans). Each warp sums its own keys' probabilities; the
// pair adds them at the end (RowTotals). The caller loads Q and the tiles and writes the rows.
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/mla_flash.cuh"

namespace fission::kernels::cuda::sparse_flash {

constexpr int kRows = 64, kKeys = 64, kThreads = 256, kValues = 512;
constexpr int kPBytes = kRows * kKeys * 2;    // the tile's probabilities, bf16
constexpr int kRedBytes = 2 * kRows * 4;      // a float per row and warp column
constexpr float kLog2e = 1.4426950408889634f;

// 16-byte chunk `chunk` of row `row` of a [rows][kChunks] tile, XOR-swizzled within groups of 8.
template <int kChunks>
__device__ __forceinline__ int Swz(int row, int chunk) {
  return row * kChunks + (chunk ^ (row & 7));
}

__device__ __forceinline__ void NamedBarrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// A thread's place in the block's fragments.
struct Lane {
  int lane, g, t4, rg, cg, q4, r8;
  int arow;          // its ldmatrix row of Q and P (A operands)
  int brow;          // and of the keys (B operand of S)
  int prow0, prow1;  // the two rows its accumulators hold
};

__device__ __forceinline__ Lane LaneOf(int tid) {
  Lane l;
  const int warp = tid >> 5;
  l.lane = tid & 31;
  l.g = l.lane >> 2;
  l.t4 = l.lane & 3;
  l.rg = warp & 3;
  l.cg = warp >> 2;
  l.q4 = l.lane >> 3;
  l.r8 = l.lane & 7;
  l.arow = l.rg * 16 + (l.q4 & 1) * 8 + l.r8;
  l.brow = l.cg * 32 + (l.q4 >> 1) * 8 + l.r8;
  l.prow0 = l.rg * 16 + l.g;
  l.prow1 = l.prow0 + 8;
  return l;
}

// The running state of a thread's two rows: 256 value columns, maximum (base 2) and sum.
struct RowState {
  float o[32][4];
  float m0, m1, l0, l1;
};

// A state that has seen nothing (maximum -inf, sum 0): a sink is added by the caller.
__device__ __forceinline__ void Reset(RowState& st) {
#pragma unroll
  for (int n = 0; n < 32; ++n) st.o[n][0] = st.o[n][1] = st.o[n][2] = st.o[n][3] = 0.0f;
  st.m0 = st.m1 = -INFINITY;
  st.l0 = st.l1 = 0.0f;
}

// S = Q·Kᵀ over rows of kChunks chunks: rows 16·rg + (g, g + 8), keys 32·cg + 8j + 2·t4 + (0, 1).
template <int kChunks>
__device__ __forceinline__ void Scores(const unsigned char* qs, const unsigned char* ks, const Lane& l,
                                       float (&s)[4][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll 4
  for (int kc = 0; kc < kChunks; kc += 2) {
    std::uint32_t af[4];
    mla::LdMatrixX4(af, qs + 16 * Swz<kChunks>(l.arow, kc + (l.q4 >> 1)));
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      std::uint32_t bf[4];
      mla::LdMatrixX4(bf, ks + 16 * Swz<kChunks>(l.brow + 16 * jj, kc + (l.q4 & 1)));
      mla::Mma(s[2 * jj], af[0], af[1], af[2], af[3], bf[0], bf[1]);
      mla::Mma(s[2 * jj + 1], af[0], af[1], af[2], af[3], bf[2], bf[3]);
    }
  }
}

// The online softmax of one tile: scores scaled to base 2 (keys whose `valid` byte is 0 count as
// -inf), the maximum shared with the partner warp, the state rescaled, and the probabilities in
// `pf` (own keys, as A fragments of k16 chunks 2·cg, 2·cg + 1) and in `ps` for the partner.
__device__ __forceinline__ void SoftmaxTile(float (&s)[4][4], const unsigned char* valid, float scale_log2,
                                            float* red, unsigned char* ps, const Lane& l, RowState& st,
                                            std::uint32_t (&pf)[2][4]) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int c = l.cg * 32 + 8 * j + 2 * l.t4;
    const bool v0 = valid[c] != 0, v1 = valid[c + 1] != 0;
    s[j][0] = v0 ? s[j][0] * scale_log2 : -INFINITY;
    s[j][1] = v1 ? s[j][1] * scale_log2 : -INFINITY;
    s[j][2] = v0 ? s[j][2] * scale_log2 : -INFINITY;
    s[j][3] = v1 ? s[j][3] * scale_log2 : -INFINITY;
    mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
    mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
  }
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  if (l.t4 == 0) {
    red[l.cg * kRows + l.prow0] = mx0;
    red[l.cg * kRows + l.prow1] = mx1;
  }
  NamedBarrier(1 + l.rg, 64);
  mx0 = fmaxf(mx0, red[(l.cg ^ 1) * kRows + l.prow0]);
  mx1 = fmaxf(mx1, red[(l.cg ^ 1) * kRows + l.prow1]);
  const float n0 = fmaxf(st.m0, mx0), n1 = fmaxf(st.m1, mx1);
  const float base0 = n0 == -INFINITY ? 0.0f : n0, base1 = n1 == -INFINITY ? 0.0f : n1;
  const float alpha0 = exp2f(st.m0 - base0), alpha1 = exp2f(st.m1 - base1);
  st.m0 = n0;
  st.m1 = n1;
  float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float e0 = exp2f(s[j][0] - base0), e1 = exp2f(s[j][1] - base0);
    const float e2 = exp2f(s[j][2] - base1), e3 = exp2f(s[j][3] - base1);
    sum0 += e0 + e1;
    sum1 += e2 + e3;
    pf[j >> 1][(j & 1) * 2] = mla::Pack(__float2bfloat16_rn(e0), __float2bfloat16_rn(e1));
    pf[j >> 1][(j & 1) * 2 + 1] = mla::Pack(__float2bfloat16_rn(e2), __float2bfloat16_rn(e3));
    const int ch = l.cg * 4 + j;
    *reinterpret_cast<std::uint32_t*>(ps + l.prow0 * 128 + 16 * (ch ^ (l.prow0 & 7)) + 4 * l.t4) =
        pf[j >> 1][(j & 1) * 2];
    *reinterpret_cast<std::uint32_t*>(ps + l.prow1 * 128 + 16 * (ch ^ (l.prow1 & 7)) + 4 * l.t4) =
        pf[j >> 1][(j & 1) * 2 + 1];
  }
  st.l0 = st.l0 * alpha0 + sum0;
  st.l1 = st.l1 * alpha1 + sum1;
#pragma unroll
  for (int n = 0; n < 32; ++n) {
    st.o[n][0] *= alpha0;
    st.o[n][1] *= alpha0;
    st.o[n][2] *= alpha1;
    st.o[n][3] *= alpha1;
  }
  NamedBarrier(1 + l.rg, 64);  // the partner's P is written
}

// O += P·V: rows as S, value columns 256·cg + 8n + 2·t4 + (0, 1), all 64 keys of the tile.
template <int kChunks>
__device__ __forceinline__ void AccumulateValues(const std::uint32_t (&pf)[2][4], const unsigned char* ps,
                                                 const unsigned char* ks, const Lane& l, RowState& st) {
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    std::uint32_t af[4];
    if ((c >> 1) == l.cg) {
#pragma unroll
      for (int e = 0; e < 4; ++e) af[e] = pf[c & 1][e];
    } else {
      mla::LdMatrixX4(af, ps + l.arow * 128 + 16 * ((2 * c + (l.q4 >> 1)) ^ (l.arow & 7)));
    }
    const int vrow = 16 * c + (l.q4 & 1) * 8 + l.r8;
#pragma unroll
    for (int jn = 0; jn < 16; ++jn) {
      std::uint32_t bf[4];
      mla::LdMatrixX4Trans(bf, ks + 16 * Swz<kChunks>(vrow, l.cg * 32 + 2 * jn + (l.q4 >> 1)));
      mla::Mma(st.o[2 * jn], af[0], af[1], af[2], af[3], bf[0], bf[1]);
      mla::Mma(st.o[2 * jn + 1], af[0], af[1], af[2], af[3], bf[2], bf[3]);
    }
  }
}

// The rows' sums over both warps of the pair: the quad's lanes, then the partner's keys (a + b
// equals b + a: both warps agree). The partner read the maxima before the last barrier.
__device__ __forceinline__ void RowTotals(const RowState& st, float* red, const Lane& l, float* total0,
                                          float* total1) {
  float l0 = st.l0, l1 = st.l1;
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  if (l.t4 == 0) {
    red[l.cg * kRows + l.prow0] = l0;
    red[l.cg * kRows + l.prow1] = l1;
  }
  NamedBarrier(1 + l.rg, 64);
  *total0 = l0 + red[(l.cg ^ 1) * kRows + l.prow0];
  *total1 = l1 + red[(l.cg ^ 1) * kRows + l.prow1];
}

// Where a block's finished rows go: row r of the block is output row row0 + r (rows from `rows`
// on are not written). One split: `out` (bf16 or fp32) at stride kValues; several: part_o and the
// base-2 log-sum-exp part_lse of split `split` (a row that saw nothing writes -inf and no values).
struct RowSink {
  std::int64_t row0 = 0;
  int rows = 0, split = 0, splits = 1;
  std::int64_t total_rows = 0;
  float* part_o = nullptr;
  float* part_lse = nullptr;
};

__device__ __forceinline__ void StoreValues(__nv_bfloat16* dst, float a, float b) {
  *reinterpret_cast<std::uint32_t*>(dst) = mla::Pack(__float2bfloat16_rn(a), __float2bfloat16_rn(b));
}
__device__ __forceinline__ void StoreValues(float* dst, float a, float b) {
  *reinterpret_cast<float2*>(dst) = make_float2(a, b);
}

template <class Out>
__device__ __forceinline__ void StoreRows(const RowState& st, float total0, float total1, const Lane& l,
                                          const RowSink& sink, Out* out) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = half ? l.prow1 : l.prow0;
    if (r >= sink.rows) continue;
    const float total = half ? total1 : total0, m = half ? st.m1 : st.m0;
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    const std::int64_t out_row = sink.row0 + r;
    if (sink.splits == 1) {
      Out* dst = out + out_row * kValues + l.cg * 256 + 2 * l.t4;
#pragma unroll
      for (int n = 0; n < 32; ++n) StoreValues(dst + 8 * n, st.o[n][2 * half] * inv, st.o[n][2 * half + 1] * inv);
    } else {
      const std::int64_t prow = sink.split * sink.total_rows + out_row;
      if (l.cg == 0 && l.t4 == 0) sink.part_lse[prow] = total > 0.0f ? m + log2f(total) : -INFINITY;
      if (total == 0.0f) continue;
      float* dst = sink.part_o + prow * kValues + l.cg * 256 + 2 * l.t4;
#pragma unroll
      for (int n = 0; n < 32; ++n) StoreValues(dst + 8 * n, st.o[n][2 * half] * inv, st.o[n][2 * half + 1] * inv);
    }
  }
}

}  // namespace fission::kernels::cuda::sparse_flash
