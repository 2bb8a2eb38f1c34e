// The expanded-form (prefill) MLA kernel: flash attention with 192-wide keys and 128-wide values,
// the softmax kept in registers. A block owns 128 query rows of one head (8 warps × 16 rows) and
// walks 64-key tiles, double-buffered through cp.async so the next tile loads while this one is
// computed. Per tile each warp: S = Q·Kᵀ for its 16 rows × 64 keys (Q fragments held in registers,
// K fragments by ldmatrix), the online-softmax update on its own rows (a row lives in the 4 lanes of
// a quad), then P (re-packed from the S accumulators, no shared memory) times V (ldmatrix.trans).
#pragma once

#include "kernels/cuda/mla_flash.cuh"

namespace fission::kernels::cuda::mla {

constexpr int kPrefillRows = 128;
constexpr int kPrefillQk = 192, kPrefillV = 128;

struct PrefillSmem {
  static constexpr int kLdQK = kPrefillQk + 8, kLdV = kPrefillV + 8;  // +16 bytes: conflict-free ldmatrix
  static constexpr std::size_t kQ = 0;
  static constexpr std::size_t kK = kQ + 2 * kPrefillRows * kLdQK;
  static constexpr std::size_t kV = kK + 2 * 2 * kKeys * kLdQK;  // two stages
  static constexpr std::size_t kLimits = kV + 2 * 2 * kKeys * kLdV;  // int per query row
  static constexpr std::size_t kBytes = kLimits + 4 * kPrefillRows;
};

// Issues the copies of key tile [k0, k0 + 64) of head h into stage buffers ks/vs (zeros past key_end).
__device__ __forceinline__ void PrefillLoadKv(__nv_bfloat16* ks, __nv_bfloat16* vs, const Params& p, int kv_base,
                                              int k0, int key_end, int h) {
  constexpr int kKChunks = kPrefillQk / 8, kVChunks = kPrefillV / 8;
  const auto* ka = static_cast<const __nv_bfloat16*>(p.ka.ptr);
  const auto* kb = static_cast<const __nv_bfloat16*>(p.kb.ptr);
  const auto* va = static_cast<const __nv_bfloat16*>(p.v.ptr);
  for (int e = threadIdx.x; e < kKeys * (kKChunks + kVChunks); e += kThreads) {
    const int r = e / (kKChunks + kVChunks), c = e % (kKChunks + kVChunks);
    const int key = k0 + r;
    const bool valid = key < key_end;
    const std::int64_t slot = static_cast<std::int64_t>(kv_base) + key;
    if (c < kKChunks) {
      const int col = c * 8;
      const __nv_bfloat16* src = ka;
      if (valid)
        src = col < p.ka.count ? ka + slot * p.ka.tok_stride + h * p.ka.head_stride + col
                               : kb + slot * p.kb.tok_stride + (col - p.ka.count);
      CpAsync16(ks + r * PrefillSmem::kLdQK + col, src, valid ? 16 : 0);
    } else {
      const int col = (c - kKChunks) * 8;
      const __nv_bfloat16* src = valid ? va + slot * p.v.tok_stride + h * p.v.head_stride + col : va;
      CpAsync16(vs + r * PrefillSmem::kLdV + col, src, valid ? 16 : 0);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) PrefillKernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  using L = PrefillSmem;
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem + L::kQ);
  __nv_bfloat16* ks0 = reinterpret_cast<__nv_bfloat16*>(smem + L::kK);
  __nv_bfloat16* vs0 = reinterpret_cast<__nv_bfloat16*>(smem + L::kV);

  const WorkItem item = p.items[blockIdx.x];
  const SeqInfo seq = p.seqs[item.seq];
  const int h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  const int rows_valid = min(kPrefillRows, seq.query_len - item.row_begin);
  // Causal limit of each row (positions need not be consecutive); the block's keys end at the largest.
  int* limits = reinterpret_cast<int*>(smem + L::kLimits);
  if (tid < kPrefillRows)
    limits[tid] = tid < rows_valid ? min(item.key_end, p.positions[seq.pos_offset + item.row_begin + tid] + 1) : 0;
  __syncthreads();
  int key_end = 0;
  for (int r = 0; r < kPrefillRows; ++r) key_end = max(key_end, limits[r]);

  // Q tile: rows past the sequence are zeros.
  {
    constexpr int kChunks = kPrefillQk / 8;
    const auto* q = static_cast<const __nv_bfloat16*>(p.qa.ptr);
    for (int e = tid; e < kPrefillRows * kChunks; e += kThreads) {
      const int r = e / kChunks, col = (e % kChunks) * 8;
      const bool valid = r < rows_valid;
      const std::int64_t token = seq.query_start + item.row_begin + r;
      CpAsync16(qs + r * L::kLdQK + col, valid ? q + token * p.qa.tok_stride + h * p.qa.head_stride + col : q,
                valid ? 16 : 0);
    }
  }
  const int tiles = key_end > item.key_begin ? (key_end - item.key_begin + kKeys - 1) / kKeys : 0;
  if (tiles > 0) PrefillLoadKv(ks0, vs0, p, seq.kv_base, item.key_begin, key_end, h);
  CpAsyncCommit();

  // This thread's two rows and their causal limits.
  const int row0 = warp * 16 + g, row1 = row0 + 8;
  const int limit0 = limits[row0], limit1 = limits[row1];
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float o[kPrefillV / 8][4];
#pragma unroll
  for (int j = 0; j < kPrefillV / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  std::uint32_t qf[kPrefillQk / 16][4];
  bool q_loaded = false;

  for (int t = 0; t < tiles; ++t) {
    const int k0 = item.key_begin + t * kKeys;
    __nv_bfloat16* ks = ks0 + (t & 1) * kKeys * L::kLdQK;
    __nv_bfloat16* vs = vs0 + (t & 1) * kKeys * L::kLdV;
    if (t + 1 < tiles)
      PrefillLoadKv(ks0 + ((t + 1) & 1) * kKeys * L::kLdQK, vs0 + ((t + 1) & 1) * kKeys * L::kLdV, p, seq.kv_base,
                    k0 + kKeys, key_end, h);
    CpAsyncCommit();
    CpAsyncWait<1>();  // everything but the tile just issued has landed
    __syncthreads();
    if (!q_loaded) {
#pragma unroll
      for (int kk = 0; kk < kPrefillQk / 16; ++kk) {
        const int q4 = lane >> 3, r = lane & 7;
        LdMatrixX4(qf[kk], qs + (warp * 16 + (q4 & 1) * 8 + r) * L::kLdQK + kk * 16 + (q4 >> 1) * 8);
      }
      q_loaded = true;
    }
    // Skip the work when all of this warp's rows end before the tile (the block's last rows reach further).
    const bool warp_active = __any_sync(0xffffffffu, k0 < limit0 || k0 < limit1);
    if (warp_active) {
      float s[kKeys / 8][4];
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kPrefillQk / 16; ++kk) {
#pragma unroll
        for (int j = 0; j < kKeys / 8; j += 2) {
          std::uint32_t b[4];
          const int q4 = lane >> 3, r = lane & 7;
          LdMatrixX4(b, ks + (j * 8 + (q4 >> 1) * 8 + r) * L::kLdQK + kk * 16 + (q4 & 1) * 8);
          Mma(s[j], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b[0], b[1]);
          Mma(s[j + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b[2], b[3]);
        }
      }
      // Scale, mask, running max over the quad's lanes.
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        const int key = k0 + j * 8 + 2 * tq;
        s[j][0] = key < limit0 ? s[j][0] * p.scale_log2 : -INFINITY;
        s[j][1] = key + 1 < limit0 ? s[j][1] * p.scale_log2 : -INFINITY;
        s[j][2] = key < limit1 ? s[j][2] * p.scale_log2 : -INFINITY;
        s[j][3] = key + 1 < limit1 ? s[j][3] * p.scale_log2 : -INFINITY;
        mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
        mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
      }
#pragma unroll
      for (int off = 1; off < 4; off <<= 1) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
      }
      const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
      const float base0 = n0 == -INFINITY ? 0.0f : n0, base1 = n1 == -INFINITY ? 0.0f : n1;
      const float alpha0 = exp2f(m0 - base0), alpha1 = exp2f(m1 - base1);
      m0 = n0;
      m1 = n1;
      l0 *= alpha0;
      l1 *= alpha1;
#pragma unroll
      for (int j = 0; j < kPrefillV / 8; ++j) {
        o[j][0] *= alpha0;
        o[j][1] *= alpha0;
        o[j][2] *= alpha1;
        o[j][3] *= alpha1;
      }
      // P in bf16 as the A operand of P·V, straight from the S accumulators.
      std::uint32_t pf[kKeys / 16][4];
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j) {
        const float e0 = exp2f(s[j][0] - base0), e1 = exp2f(s[j][1] - base0);
        const float e2 = exp2f(s[j][2] - base1), e3 = exp2f(s[j][3] - base1);
        l0 += e0 + e1;
        l1 += e2 + e3;
        pf[j >> 1][(j & 1) * 2] = Pack(__float2bfloat16_rn(e0), __float2bfloat16_rn(e1));
        pf[j >> 1][(j & 1) * 2 + 1] = Pack(__float2bfloat16_rn(e2), __float2bfloat16_rn(e3));
      }
#pragma unroll
      for (int kk = 0; kk < kKeys / 16; ++kk) {
#pragma unroll
        for (int j = 0; j < kPrefillV / 8; j += 2) {
          std::uint32_t b[4];
          const int q4 = lane >> 3, r = lane & 7;
          LdMatrixX4Trans(b, vs + (kk * 16 + (q4 & 1) * 8 + r) * L::kLdV + j * 8 + (q4 >> 1) * 8);
          Mma(o[j], pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3], b[0], b[1]);
          Mma(o[j + 1], pf[kk][0], pf[kk][1], pf[kk][2], pf[kk][3], b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this stage is overwritten by the copies issued next iteration
  }

  // Row sums over the quad, normalise, write.
#pragma unroll
  for (int off = 1; off < 4; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = half ? row1 : row0;
    if (row >= rows_valid) continue;
    const float l = half ? l1 : l0;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const std::int64_t token = seq.query_start + item.row_begin + row;
    const std::int64_t base = token * p.out_tok_stride + h * p.out_head_stride + 2 * tq;
#pragma unroll
    for (int j = 0; j < kPrefillV / 8; ++j) {
      StoreF(p.out, base + j * 8, p.out_elem, o[j][2 * half] * inv);
      StoreF(p.out, base + j * 8 + 1, p.out_elem, o[j][2 * half + 1] * inv);
    }
  }
}

}  // namespace fission::kernels::cuda::mla
