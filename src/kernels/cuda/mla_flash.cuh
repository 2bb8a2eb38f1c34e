// The flash-style attention kernel behind both MLA forms: online softmax over key tiles, no S×S
// materialisation, bf16 tensor-core products (mma.sync m16n8k16) with fp32 accumulation.
//
// A block owns 16·RB query rows (RB = 1 or 4) and walks 64-key tiles. Rows are (token, head) pairs: in the expanded
// (prefill) form a block holds 64 tokens of one head (grid.y = head), each head with its own keys;
// in the absorbed (decode) form a block holds 64 (token, head) pairs of one sequence that share the
// latent rows as keys, and the values are the first DV columns of those rows. Per tile:
//   1. S = Q·Kᵀ: 8 warps, each 16 rows × 8·RB keys, written to shared memory (scaled to log2
//      units, causal mask applied per row). With one row block (RB = 1), each warp takes 32 keys
//      over a quarter of the dimensions instead, and phase 2 sums the four partial scores.
//   2. Online softmax: 16/RB threads per row update the running max and sum, write P (bf16).
//   3. O += P·V: each warp 16 rows × DV·RB/8 columns, accumulators in registers, rescaled by the
//      change of the running max first.
// RB = 1 serves decode batches with at most 16 rows per sequence (16 heads under tensor
// parallelism): no tensor work is spent on empty rows, and its two key stages fill a multiprocessor.
// A block may cover one split of the keys; partial results then carry their log-sum-exp and a
// second kernel merges the splits.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/mla_latent.cuh"

namespace fission::kernels::cuda::mla {

constexpr int kMaxRows = 64, kKeys = 64, kThreads = 256;

// Where a row of Q, K or V comes from: element c < count of row (index, head) is at
// ptr[index * tok_stride + head * head_stride + c].
struct RowSrc {
  const void* ptr = nullptr;
  Elem elem = Elem::kBF16;
  std::int64_t tok_stride = 0, head_stride = 0;
  int count = 0;
};

// A sequence of the batch: its query rows, its keys, where its keys start in a contiguous key
// block (kv_base) or its block table (bt_offset), and where its query positions start (pos_offset).
struct SeqInfo {
  int query_start, query_len, kv_len, kv_base, bt_offset, pos_offset;
};

struct WorkItem {
  int seq, row_begin, key_begin, key_end, split;
};

struct Params {
  RowSrc qa, qb;  // a Q row is qa's elements then qb's
  RowSrc ka, kb;  // a K row likewise, read at the key's slot
  RowSrc v;       // unused when V is the first DV columns of K
  // Absorbed form over FP8 entries (fp8 set): key rows are decoded from `latent`, not read via ka/kb.
  LatentRows latent;
  const SeqInfo* seqs;
  const WorkItem* items;
  const std::int32_t* block_tables;  // paged keys: slot = table[key / page] * page + key % page
  const std::int32_t* positions;     // query t of a sequence sees keys [0, positions[pos_offset + t]]
  int page_size;                     // 0: keys are contiguous from kv_base
  int heads;
  int rows_heads;  // heads when a block's rows are (token, head) pairs, 1 when grid.y is the head
  float scale_log2;
  // Output row (token, head) at out[token * out_tok_stride + head * out_head_stride + c] when there
  // is one split; otherwise part_o[(split * total_rows + token * heads + head) * DV + c] and part_lse.
  void* out;
  Elem out_elem;
  std::int64_t out_tok_stride, out_head_stride;
  float* part_o;
  float* part_lse;
  int num_splits;
  std::int64_t total_rows;
};

__device__ __forceinline__ void Mma(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                    std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t Pack(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<std::uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

// Eight consecutive elements as bf16 (16 bytes), from a bf16 or fp32 source.
__device__ __forceinline__ uint4 Load8(const void* base, std::int64_t idx, Elem e) {
  if (e == Elem::kBF16) return *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + idx);
  const float4* f = reinterpret_cast<const float4*>(static_cast<const float*>(base) + idx);
  const float4 x = f[0], y = f[1];
  uint4 r;
  r.x = Pack(__float2bfloat16_rn(x.x), __float2bfloat16_rn(x.y));
  r.y = Pack(__float2bfloat16_rn(x.z), __float2bfloat16_rn(x.w));
  r.z = Pack(__float2bfloat16_rn(y.x), __float2bfloat16_rn(y.y));
  r.w = Pack(__float2bfloat16_rn(y.z), __float2bfloat16_rn(y.w));
  return r;
}

__device__ __forceinline__ unsigned SmemAddr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void LdMatrixX4(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}
__device__ __forceinline__ void LdMatrixX4Trans(std::uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(SmemAddr(p)));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// 16 bytes global -> shared without a register round trip; src_bytes 0 writes zeros.
__device__ __forceinline__ void CpAsync16(void* smem_dst, const void* src, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
}

// Bulk copies (sm_90): one instruction moves a whole contiguous row into shared memory and counts
// its bytes on a shared-memory barrier; a thread waits for a barrier's phase by its parity.
__device__ __forceinline__ void BarrierInit(std::uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(arrivals));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void BarrierArrive(std::uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(SmemAddr(bar)) : "memory");
}
__device__ __forceinline__ void BarrierExpectBytes(std::uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(SmemAddr(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void BulkCopy(void* dst, const void* src, unsigned bytes, std::uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   SmemAddr(dst)),
               "l"(src), "r"(bytes), "r"(SmemAddr(bar))
               : "memory");
}
__device__ __forceinline__ void BarrierWait(std::uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n @!done bra WAIT;\n}\n" ::"r"(
          SmemAddr(bar)),
      "r"(parity)
      : "memory");
}

// Fills rows [0, NR) of an [NR][ld] bf16 tile: row r from (index[r], head[r]) of a then b, or zeros
// where index[r] < 0. Counts are multiples of 8. bf16 sources are copied asynchronously (every copy
// of the tile in flight at once; CpAsyncWaitAll before use); fp32 sources are converted through
// registers, eight loads in flight per thread.
template <int D, int NR>
__device__ __forceinline__ void LoadTile(__nv_bfloat16* tile, int ld, const RowSrc& a, const RowSrc& b,
                                         const std::int64_t* index, const int* head) {
  constexpr int kChunks = D / 8;
  constexpr int kTotal = NR * kChunks;
  if (a.elem == Elem::kBF16 && (b.count == 0 || b.elem == Elem::kBF16)) {
    for (int e = threadIdx.x; e < kTotal; e += kThreads) {
      const int r = e / kChunks, c = (e % kChunks) * 8;
      const std::int64_t i = index[r];
      const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(a.ptr);
      if (i >= 0) {
        src = c < a.count ? static_cast<const __nv_bfloat16*>(a.ptr) + i * a.tok_stride + head[r] * a.head_stride + c
                          : static_cast<const __nv_bfloat16*>(b.ptr) + i * b.tok_stride + head[r] * b.head_stride +
                                (c - a.count);
      }
      CpAsync16(tile + r * ld + c, src, i >= 0 ? 16 : 0);
    }
    return;
  }
  constexpr int kBatch = 8;
  for (int e0 = threadIdx.x; e0 < kTotal; e0 += kThreads * kBatch) {
    uint4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = e0 + u * kThreads;
      v[u] = make_uint4(0, 0, 0, 0);
      if (e < kTotal) {
        const int r = e / kChunks, c = (e % kChunks) * 8;
        const std::int64_t i = index[r];
        if (i >= 0) {
          if (c < a.count)
            v[u] = Load8(a.ptr, i * a.tok_stride + head[r] * a.head_stride + c, a.elem);
          else
            v[u] = Load8(b.ptr, i * b.tok_stride + head[r] * b.head_stride + (c - a.count), b.elem);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int e = e0 + u * kThreads;
      if (e < kTotal) {
        const int r = e / kChunks, c = (e % kChunks) * 8;
        *reinterpret_cast<uint4*>(tile + r * ld + c) = v[u];
      }
    }
  }
}

// FP8 latent entries (the absorbed form over --kv-cache-dtype fp8_e4m3) reach a key tile in two
// moves: the entries of a tile are copied as they are into a staging area (a bulk copy an entry,
// issued a tile ahead, so their bytes arrive while the previous tile computes), then decoded from shared memory
// into the bf16 tile the exact rows fill (eight codes times their group's scale per 16 bytes).
constexpr int kFp8Entry = 656;  // LatentEntryBytes(512, 64): 512 codes, 4 scales, 64 bf16 rope values

// A staged entry of zeros (an index of -1) decodes to zeros.
template <int D, int NR>
__device__ __forceinline__ void DecodeFp8Entries(__nv_bfloat16* tile, int ld, const unsigned char* raw, int lora) {
  constexpr int kChunks = D / 8;
  for (int e = threadIdx.x; e < NR * kChunks; e += kThreads) {
    const int r = e / kChunks, c = e % kChunks;
    *reinterpret_cast<uint4*>(tile + r * ld + c * 8) = Fp8LatentChunk(raw + r * kFp8Entry, lora, c);
  }
}

// Decode blocks of 16 rows prefetch the next key tile into a second stage while computing one
// (the latent rows are both keys and values there, so one stage is one buffer).
template <int DQK, int DV, bool kVFromK, int RB>
struct Smem {
  static constexpr int kRows = 16 * RB;
  static constexpr int kStages = (RB == 1 && kVFromK) ? 2 : 1;
  static constexpr int kLdQK = DQK + 8, kLdV = DV + 8, kLdS = kKeys + 4, kLdP = kKeys + 8;
  static constexpr std::size_t kQ = 0;
  static constexpr std::size_t kK = kQ + sizeof(__nv_bfloat16) * kRows * kLdQK;
  static constexpr std::size_t kV = kK + sizeof(__nv_bfloat16) * kStages * kKeys * kLdQK;
  static constexpr std::size_t kS = kV + (kVFromK ? 0 : sizeof(__nv_bfloat16) * kKeys * kLdV);
  static constexpr std::size_t kP = kS + sizeof(float) * kRows * kLdS;
  static constexpr std::size_t kStats = kP + sizeof(__nv_bfloat16) * kRows * kLdP;
  // m, l, alpha (float), limit, head (int), token and key index (int64)
  static constexpr std::size_t kBars = (kStats + kMaxRows * (3 * 4 + 2 * 4) + (kMaxRows + 2 * kKeys) * 8 + 15) / 16 * 16;
  // A bulk-copy barrier per key stage (the absorbed form).
  static constexpr std::size_t kRaw = kBars + 16;
  // The absorbed form's staging area for one tile of FP8 entries.
  static constexpr std::size_t kBytes = kRaw + (kVFromK ? kKeys * kFp8Entry : 0);
};

template <int DQK, int DV, bool kVFromK, int RB>
__global__ void __launch_bounds__(kThreads, DQK <= 192 ? 2 : 1) FlashKernel(const Params p) {
  using L = Smem<DQK, DV, kVFromK, RB>;
  constexpr int kRows = L::kRows;
  constexpr int kGroups = 8 / RB;              // warps sharing a row block
  constexpr int kKeysPerWarp = kKeys / kGroups;  // phase 1
  constexpr int kColsPerWarp = DV / kGroups;     // phase 3
  constexpr int kTpr = kThreads / kRows;         // phase 2: threads per row
  constexpr int kVpt = kKeys / kTpr;             // and values per thread
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem + L::kQ);
  __nv_bfloat16* const ks_base = reinterpret_cast<__nv_bfloat16*>(smem + L::kK);
  __nv_bfloat16* const vs_base = reinterpret_cast<__nv_bfloat16*>(smem + L::kV);
  constexpr int kLdV = kVFromK ? L::kLdQK : L::kLdV;
  float* ss = reinterpret_cast<float*>(smem + L::kS);
  __nv_bfloat16* ps = reinterpret_cast<__nv_bfloat16*>(smem + L::kP);
  float* row_m = reinterpret_cast<float*>(smem + L::kStats);
  float* row_l = row_m + kMaxRows;
  float* row_alpha = row_l + kMaxRows;
  int* row_limit = reinterpret_cast<int*>(row_alpha + kMaxRows);
  int* row_head = row_limit + kMaxRows;
  std::int64_t* row_token = reinterpret_cast<std::int64_t*>(row_head + kMaxRows);
  std::int64_t* key_index = row_token + kMaxRows;

  const WorkItem item = p.items[blockIdx.x];
  const SeqInfo seq = p.seqs[item.seq];
  const int rows_total = seq.query_len * p.rows_heads;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;

  // An empty split (a short context's later keys) adds nothing: its rows' log-sum-exp is -inf, which
  // the merge skips together with their part_o rows, so nothing is loaded and nothing else written.
  if (p.num_splits > 1 && item.key_begin >= item.key_end) {
    const int f = item.row_begin + tid;
    if (tid < kRows && f < rows_total) {
      const int head = p.rows_heads == 1 ? static_cast<int>(blockIdx.y) : f % p.rows_heads;
      const std::int64_t token = seq.query_start + f / p.rows_heads;
      p.part_lse[static_cast<std::int64_t>(item.split) * p.total_rows + token * p.heads + head] = -INFINITY;
    }
    return;
  }

  if (tid < kMaxRows) {
    const int f = item.row_begin + tid;
    const bool valid = f < rows_total && tid < kRows;
    const int t = valid ? f / p.rows_heads : 0;
    row_head[tid] = p.rows_heads == 1 ? static_cast<int>(blockIdx.y) : f % p.rows_heads;
    row_token[tid] = valid ? seq.query_start + t : -1;
    row_limit[tid] = valid ? min(item.key_end, p.positions[seq.pos_offset + t] + 1) : 0;
    row_m[tid] = -INFINITY;
    row_l[tid] = 0.0f;
  }
  std::uint64_t* const bars = reinterpret_cast<std::uint64_t*>(smem + L::kBars);
  if (kVFromK && tid == 0) {
    BarrierInit(bars, kKeys);
    BarrierInit(bars + 1, kKeys);
  }
  __syncthreads();
  LoadTile<DQK, kRows>(qs, L::kLdQK, p.qa, p.qb, row_token, row_head);
  CpAsyncWaitAll();  // visible to all threads after the loop's first barrier
  // The block's keys end where its furthest-seeing row's do (positions need not be consecutive).
  int key_end = 0;
  for (int r = 0; r < kRows; ++r) key_end = max(key_end, row_limit[r]);

  const int rb = warp % RB, cg = warp / RB;  // row block of 16, and which share of the keys / of DV
  constexpr int kNt = kColsPerWarp / 8;      // n-tiles of O per warp
  float o[kNt][4];
#pragma unroll
  for (int j = 0; j < kNt; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  const int r0 = rb * 16 + g;

  // One row block (RB = 1, decode): phase 1 splits the dimensions instead of giving each warp 8
  // keys over all of them, which chained DQK/16 dependent products per warp. Warp w takes keys
  // (w & 1)·32 + [0, 32) over dimensions (w >> 1)·DQK/4 + [0, DQK/4): four independent chains of
  // DQK/64 products, its query fragments held in registers for the whole block, and its partial
  // scores summed by the softmax in a fixed order from the query tile's memory (no longer needed).
  constexpr bool kSplitDims = RB == 1;
  constexpr int kDimSteps = DQK / 64;  // k-steps of 16 in a warp's quarter of the dimensions
  constexpr int kLdPart = kKeys + 4;
  static_assert(!kSplitDims || (DQK % 64 == 0 && 4 * 16 * kLdPart * sizeof(float) <= L::kK - L::kQ),
                "the partial scores fit the query tile");
  std::uint32_t qf[kSplitDims ? kDimSteps : 1][4];
  float* const partial_s = reinterpret_cast<float*>(smem + L::kQ);
  const int key_half = warp & 1, dim_quarter = warp >> 1;
  if constexpr (kSplitDims) {
    __syncthreads();  // the query tile is complete
    const int q4 = lane >> 3, r8 = lane & 7;
    const __nv_bfloat16* qrow = qs + ((q4 & 1) * 8 + r8) * L::kLdQK + (q4 >> 1) * 8 + dim_quarter * (DQK / 4);
#pragma unroll
    for (int k = 0; k < kDimSteps; ++k) LdMatrixX4(qf[k], qrow + k * 16);
    __syncthreads();  // every warp holds its fragments before the partial scores overwrite the tile
  }

  // The cache slot of key `key` of this sequence, or -1 past the block's keys.
  auto slot_of = [&](int key) -> std::int64_t {
    if (key >= key_end) return -1;
    return p.page_size > 0 ? static_cast<std::int64_t>(p.block_tables[seq.bt_offset + key / p.page_size]) *
                                     p.page_size + key % p.page_size
                           : static_cast<std::int64_t>(seq.kv_base) + key;
  };
  // FP8 entries go through the staging area into stage 0 of the key tiles (decoded there); exact
  // bf16 rows of one row block go straight into two alternating stages. Both arrive by bulk copies.
  const bool fp8_keys = kVFromK && p.latent.fp8;
  const bool bulk_rows = L::kStages == 2 && !fp8_keys && p.ka.elem == Elem::kBF16;
  unsigned char* const raw = smem + L::kRaw;
  const int tiles = key_end > item.key_begin ? (key_end - item.key_begin + kKeys - 1) / kKeys : 0;
  // Tile t's rows by bulk copies, a thread a row: key k of the tile is `bytes` bytes at src + slot ·
  // src_stride, copied to dst + k · dst_stride; keys past the block's are zero-filled by ordinary
  // stores (seen after the next barrier), so their zero weights never meet stale values. Each of
  // the tile's kKeys threads arrives on the stage's barrier, a copying one with its bytes.
  auto bulk_tile = [&](int t, unsigned char* dst, int dst_stride, const void* src, std::int64_t src_stride,
                       int bytes, std::uint64_t* bar) {
    if (tid >= kKeys) return;
    const std::int64_t slot = slot_of(item.key_begin + t * kKeys + tid);
    unsigned char* d = dst + tid * dst_stride;
    if (slot >= 0) {
      BarrierExpectBytes(bar, static_cast<unsigned>(bytes));
      BulkCopy(d, static_cast<const unsigned char*>(src) + slot * src_stride, static_cast<unsigned>(bytes), bar);
    } else {
      for (int c = 0; c < bytes; c += 16) *reinterpret_cast<uint4*>(d + c) = make_uint4(0, 0, 0, 0);
      BarrierArrive(bar);
    }
  };
  auto stage_fp8 = [&](int t) {
    bulk_tile(t, raw, kFp8Entry, p.latent.cache, kFp8Entry, kFp8Entry, bars);
  };
  auto stage_rows = [&](int t) {
    bulk_tile(t, reinterpret_cast<unsigned char*>(ks_base + (t & 1) * kKeys * L::kLdQK),
              L::kLdQK * static_cast<int>(sizeof(__nv_bfloat16)), p.ka.ptr,
              p.ka.tok_stride * static_cast<std::int64_t>(sizeof(__nv_bfloat16)),
              DQK * static_cast<int>(sizeof(__nv_bfloat16)), bars + (t & 1));
  };
  if (tiles > 0) {
    if (fp8_keys) {
      stage_fp8(0);
    } else if (bulk_rows) {
      stage_rows(0);
    } else if (L::kStages == 2) {
      if (tid < kKeys) key_index[tid] = slot_of(item.key_begin + tid);
      __syncthreads();
      LoadTile<DQK, kKeys>(ks_base, L::kLdQK, p.ka, p.kb, key_index, row_head);
      CpAsyncCommit();
    }
  }
  for (int t = 0; t < tiles; ++t) {
    const int k0 = item.key_begin + t * kKeys;
    __nv_bfloat16* ks = ks_base + (L::kStages == 2 && !fp8_keys ? (t & 1) : 0) * kKeys * L::kLdQK;
    __nv_bfloat16* vs = kVFromK ? ks : vs_base;
    if (fp8_keys) {
      // Decode this tile's staged entries (the previous tile's products are done: the loop's last
      // barrier; the barrier after the decode makes the tile visible), then stage the next tile's
      // entries while this one computes.
      BarrierWait(bars, t & 1);
      __syncthreads();
      DecodeFp8Entries<DQK, kKeys>(ks, L::kLdQK, raw, p.latent.lora);
      __syncthreads();
      if (t + 1 < tiles) stage_fp8(t + 1);
    } else if (bulk_rows) {
      // Issue the next tile into the other stage (last read by the previous tile), then wait for this one.
      if (t + 1 < tiles) stage_rows(t + 1);
      BarrierWait(bars + (t & 1), (t >> 1) & 1);
      __syncthreads();
    } else if constexpr (L::kStages == 2) {
      // Rows converted to bf16 on the way (an fp32 cache) go through registers (LoadTile).
      if (t + 1 < tiles) {
        std::int64_t* next_index = key_index + ((t + 1) & 1) * kKeys;
        if (tid < kKeys) next_index[tid] = slot_of(k0 + kKeys + tid);
        __syncthreads();
        LoadTile<DQK, kKeys>(ks_base + ((t + 1) & 1) * kKeys * L::kLdQK, L::kLdQK, p.ka, p.kb, next_index, row_head);
      }
      CpAsyncCommit();
      CpAsyncWait<1>();
      __syncthreads();
    } else {
      if (tid < kKeys) key_index[tid] = slot_of(k0 + tid);
      __syncthreads();
      // Keys share the block's head (expanded form) or ignore it (absorbed form, head stride 0).
      LoadTile<DQK, kKeys>(ks, L::kLdQK, p.ka, p.kb, key_index, row_head);
      if constexpr (!kVFromK) {
        RowSrc none;
        LoadTile<DV, kKeys>(vs, kLdV, p.v, none, key_index, row_head);
      }
      CpAsyncWaitAll();
      __syncthreads();
    }

    // 1. S = Q·Kᵀ: partial scores of the warp's keys and quarter of the dimensions (one row block),
    // or rows r0, r0 + 8 and keys cg·kKeysPerWarp + [0, kKeysPerWarp) over every dimension.
    if constexpr (kSplitDims) {
      float sp[4][4];
#pragma unroll
      for (int j = 0; j < 4; ++j) sp[j][0] = sp[j][1] = sp[j][2] = sp[j][3] = 0.0f;
      const int q4 = lane >> 3, r8 = lane & 7;
      const __nv_bfloat16* krow =
          ks + (key_half * 32 + (q4 >> 1) * 8 + r8) * L::kLdQK + (q4 & 1) * 8 + dim_quarter * (DQK / 4);
#pragma unroll
      for (int k = 0; k < kDimSteps; ++k) {
#pragma unroll
        for (int j = 0; j < 4; j += 2) {
          std::uint32_t b[4];
          LdMatrixX4(b, krow + j * 8 * L::kLdQK + k * 16);
          Mma(sp[j], qf[k][0], qf[k][1], qf[k][2], qf[k][3], b[0], b[1]);
          Mma(sp[j + 1], qf[k][0], qf[k][1], qf[k][2], qf[k][3], b[2], b[3]);
        }
      }
      float* dst = partial_s + (dim_quarter * 16 + g) * kLdPart + key_half * 32 + 2 * tq;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        *reinterpret_cast<float2*>(dst + j * 8) = make_float2(sp[j][0], sp[j][1]);
        *reinterpret_cast<float2*>(dst + 8 * kLdPart + j * 8) = make_float2(sp[j][2], sp[j][3]);
      }
    } else {
      constexpr int kNs = kKeysPerWarp / 8;
      static_assert(kNs >= 2 && kNs % 2 == 0);
      float s[kNs][4];
#pragma unroll
      for (int j = 0; j < kNs; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
      const int q4 = lane >> 3, r8 = lane & 7;
      const __nv_bfloat16* qrow = qs + (rb * 16 + (q4 & 1) * 8 + r8) * L::kLdQK + (q4 >> 1) * 8;
#pragma unroll 4
      for (int kk = 0; kk < DQK; kk += 16) {
        std::uint32_t a[4];
        LdMatrixX4(a, qrow + kk);
#pragma unroll
        for (int j = 0; j < kNs; j += 2) {
          std::uint32_t b[4];
          LdMatrixX4(b, ks + (cg * kKeysPerWarp + j * 8 + (q4 >> 1) * 8 + r8) * L::kLdQK + kk + (q4 & 1) * 8);
          Mma(s[j], a[0], a[1], a[2], a[3], b[0], b[1]);
          Mma(s[j + 1], a[0], a[1], a[2], a[3], b[2], b[3]);
        }
      }
#pragma unroll
      for (int j = 0; j < kNs; ++j) {
        const int c = cg * kKeysPerWarp + j * 8 + 2 * tq;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = r0 + (e >> 1) * 8, cc = c + (e & 1);
          ss[r * L::kLdS + cc] = (k0 + cc < row_limit[r]) ? s[j][e] * p.scale_log2 : -INFINITY;
        }
      }
    }
    __syncthreads();

    // 2. Online softmax, kTpr threads per row, kVpt keys each.
    {
      const int r = tid / kTpr, part = tid % kTpr;
      float v[kVpt];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < kVpt; ++i) {
        if constexpr (kSplitDims) {
          const int c = part * kVpt + i;
          const float* q = partial_s + r * kLdPart + c;
          const float sum = ((q[0] + q[16 * kLdPart]) + q[32 * kLdPart]) + q[48 * kLdPart];
          v[i] = k0 + c < row_limit[r] ? sum * p.scale_log2 : -INFINITY;
        } else {
          v[i] = ss[r * L::kLdS + part * kVpt + i];
        }
        mx = fmaxf(mx, v[i]);
      }
#pragma unroll
      for (int o = 1; o < kTpr; o <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_old = row_m[r];
      const float m_new = fmaxf(m_old, mx);
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing visible yet stays at zero
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < kVpt; i += 2) {
        const float e0 = exp2f(v[i] - base), e1 = exp2f(v[i + 1] - base);
        sum += e0 + e1;
        *reinterpret_cast<std::uint32_t*>(ps + r * L::kLdP + part * kVpt + i) =
            Pack(__float2bfloat16_rn(e0), __float2bfloat16_rn(e1));
      }
#pragma unroll
      for (int o = 1; o < kTpr; o <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (part == 0) {
        const float alpha = exp2f(m_old - base);
        row_l[r] = row_l[r] * alpha + sum;
        row_m[r] = m_new;
        row_alpha[r] = alpha;
      }
    }
    __syncthreads();

    // 3. O = O·alpha + P·V for rows r0, r0 + 8 and columns cg·kColsPerWarp + [0, kColsPerWarp).
    {
      const float al0 = row_alpha[r0], al1 = row_alpha[r0 + 8];
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
        o[j][0] *= al0;
        o[j][1] *= al0;
        o[j][2] *= al1;
        o[j][3] *= al1;
      }
#pragma unroll
      for (int kk = 0; kk < kKeys; kk += 16) {
        const std::uint32_t a0 = *reinterpret_cast<const std::uint32_t*>(ps + r0 * L::kLdP + kk + 2 * tq);
        const std::uint32_t a1 = *reinterpret_cast<const std::uint32_t*>(ps + (r0 + 8) * L::kLdP + kk + 2 * tq);
        const std::uint32_t a2 = *reinterpret_cast<const std::uint32_t*>(ps + r0 * L::kLdP + kk + 2 * tq + 8);
        const std::uint32_t a3 = *reinterpret_cast<const std::uint32_t*>(ps + (r0 + 8) * L::kLdP + kk + 2 * tq + 8);
        const int q4 = lane >> 3, r8 = lane & 7;
        const __nv_bfloat16* vrow = vs + (kk + (q4 & 1) * 8 + r8) * kLdV + cg * kColsPerWarp + (q4 >> 1) * 8;
#pragma unroll
        for (int j = 0; j < kNt; j += 2) {
          std::uint32_t b[4];
          LdMatrixX4Trans(b, vrow + j * 8);
          Mma(o[j], a0, a1, a2, a3, b[0], b[1]);
          Mma(o[j + 1], a0, a1, a2, a3, b[2], b[3]);
        }
      }
    }
    __syncthreads();
  }

  // Normalise and write rows r0 and r0 + 8.
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    const int r = r0 + hr * 8;
    const std::int64_t token = row_token[r];
    if (token < 0) continue;
    const float l = row_l[r];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int head = row_head[r];
    if (p.num_splits == 1) {
      const std::int64_t base = token * p.out_tok_stride + head * p.out_head_stride + cg * kColsPerWarp + 2 * tq;
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
        StoreF(p.out, base + j * 8, p.out_elem, o[j][2 * hr] * inv);
        StoreF(p.out, base + j * 8 + 1, p.out_elem, o[j][2 * hr + 1] * inv);
      }
    } else {
      // A row that saw no key of this split gets lse = -inf and no part_o row: the merge reads
      // part_o only for splits of nonzero weight.
      const std::int64_t row = static_cast<std::int64_t>(item.split) * p.total_rows + token * p.heads + head;
      if (cg == 0 && tq == 0) p.part_lse[row] = l > 0.0f ? row_m[r] + log2f(l) : -INFINITY;
      if (l == 0.0f) continue;
      float* dst = p.part_o + row * DV + cg * kColsPerWarp + 2 * tq;
#pragma unroll
      for (int j = 0; j < kNt; ++j) {
        dst[j * 8] = o[j][2 * hr] * inv;
        dst[j * 8 + 1] = o[j][2 * hr + 1] * inv;
      }
    }
  }
}

// Merges the splits of row (token, head) by their log-sum-exp (log2 units). The split weights are
// computed once per row into shared memory; the column sums then issue independent loads. Block b
// merges row rows[b], or row b when rows is null (every row: a pure decode step). A split of
// weight 0 (lse -inf: no key seen) is skipped, its partial not read. Defined once, in mla_attention.cu (the sparse
// attention of dsa_sparse_mla.cu launches it too).
constexpr int kMaxSplits = 1024;
__global__ void MergeKernel(const float* part_o, const float* part_lse, int num_splits, std::int64_t total_rows,
                            int dv, const std::int64_t* rows, void* out, Elem oe);

}  // namespace fission::kernels::cuda::mla
