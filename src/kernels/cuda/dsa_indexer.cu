// The lightning indexer of DeepSeek Sparse Attention on CUDA (kernels/dsa_ops.h): its key cache
// and the scoring of every query row against its sequence's keys; the selection is dsa_topk.cu's.
//
// Key cache: exact rows (fp32 or bf16, WriteKv's copy) or, in fp8 mode, U8 rows of head_dim e4m3
// codes followed by the key's fp32 scale, quantized exactly as the CPU does (scale =
// max(amax, 1e-4) / 448, codes rounded to nearest even and saturated): the same bytes. A slot is a
// row, whatever a key covers.
//
// Keys: one per token (DSA), or one per entry of tokens_per_entry positions (DeepSeek-V4's CSA):
// a query at position p sees keys [0, (p + 1) / tokens_per_entry) (VisibleEntries), key e is row
// EntrySlot(table, page_size, tokens_per_entry, e) (KeySlot: a page of the table holds
// page_size / tokens_per_entry keys), and the score rows, the selection and topk are indexed by
// key. Both kernels and the selection are otherwise the same for tokens and entries.
//
// Scoring, score[s] = Σ_h weight_scale · w[t, h] · ReLU(q[t, h] · key[s]):
//  - fp8 cache, head_dim 128 and 16, 32 or 64 heads: FP8 tensor cores (mma.sync m16n8k32 e4m3,
//    fp32 accumulation). q is quantized per (row, head) as the CPU does, and each head's scale is
//    folded with its weight into one coefficient; ReLU commutes with the positive scales, so a
//    key's score is key_scale · Σ_h coef[h] · ReLU(q_codes[h] · key_codes). A block of 8 warps
//    scores R = 1, 2, 4 or 8 query rows of one sequence (consecutive rows of a prefill, one row of
//    a decode) over a range of its keys, in tiles of 128 keys streamed from the paged cache into
//    shared memory (six cp.async stages, the cache's bytes as they are: 16-byte copies of 4-key
//    runs when a page holds a multiple of 4 keys, their table lookups a tile ahead, otherwise
//    4-byte copies). In the MMA the keys are the rows (16 per m-tile, A from shared memory) and
//    the heads the columns (8 per n-tile, B: the row's q codes, held in registers for the whole
//    block); the k order of the dot product is permuted so that a lane's fragments are one
//    contiguous 32-byte piece of its key rows and of its heads' codes. Warp w takes row w % R and
//    m-tiles w / R + i · 8 / R. The head sum is reduced over the quad's lanes, scaled by the key's
//    scale and written to a score row per query row.
//  - any other shape or an exact cache: an fp32 kernel (q and a 32-key tile in shared memory, a
//    lane per head), the parity path.
// Both kernels also record each row's largest and smallest score, which the selection's radix
// passes start from. Rows that see at most topk keys are not scored.
//
// Work: a pure decode step (kernels/cuda/mla_host.h's PureDecode) reads positions and block tables
// through UploadPerSequence (inside a graph's input block: its device copy) and each block derives
// its key range from the position on the device, so the step can be captured; the splits of a
// sequence's keys follow from the batch size (and the table's width) alone. Other steps list
// blocks on the host (kept for the step by StepMemo) and score at most kScoreBudget bytes of rows
// at a time.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/dsa_common.cuh"
#include "kernels/cuda/mma_gemv.cuh"
#include "kernels/cuda/mla_flash.cuh"
#include "kernels/cuda/mla_host.h"

namespace fission::kernels::cuda {
namespace {

using dsa::OrderedBits;
using dsa::VisibleEntries;

constexpr float kE4M3Max = 448.0f;
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kTileKeys = 128, kStages = 6, kDim = 128, kKeyBytes = kDim + 4;
constexpr int kTileBytes = kTileKeys * kKeyBytes;  // 16896: a whole number of 16-byte chunks
// A tile as 16-byte copies of 4-key runs (page sizes that are multiples of 4): 33 a run.
constexpr int kRunChunks = 4 * kKeyBytes / 16, kTileChunks = kTileKeys / 4 * kRunChunks;
constexpr int kChunksPerThread = (kTileChunks + kWarps * 32 - 1) / (kWarps * 32);
constexpr int kGenericKeys = 32;
// Scores held at once by a host-planned call (prefill): rows are scored and selected in groups.
constexpr std::int64_t kScoreBudget = std::int64_t{256} << 20;
// Keys a block scores at least (its q fragments and pipeline fill are paid once per block).
constexpr int kMinChunk = 512, kGenericMinChunk = 256;
constexpr std::int64_t kMaxDecodeSplits = 64;

__device__ __forceinline__ float E4M3ToFloat(std::uint8_t code) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// 4 bytes global -> shared (the 4-byte alignment of a 132-byte key row); src_bytes 0 writes zeros.
__device__ __forceinline__ void CpAsync4(void* smem_dst, const void* src, int src_bytes) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// One warp per row of `dim` values: its e4m3 codes (written to codes[0, dim) when not null, and
// their values to decoded when not null) and its scale, the rule of kernels/dsa_ops.h.
__device__ float QuantizeRow(const void* x, Elem xe, std::int64_t base, int dim, std::uint8_t* codes,
                             float* decoded) {
  const int lane = threadIdx.x & 31;
  float amax = 0.0f;
  for (int d = lane; d < dim; d += 32) amax = fmaxf(amax, fabsf(LoadF(x, base + d, xe)));
  amax = WarpMax(amax);
  const float scale = fmaxf(amax, kIndexFp8MinAmax) / kE4M3Max;
  for (int d = lane; d < dim; d += 32) {
    const auto code = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(LoadF(x, base + d, xe) / scale, __NV_SATFINITE,
                                                                      __NV_E4M3));
    if (codes != nullptr) codes[d] = code;
    if (decoded != nullptr) decoded[d] = E4M3ToFloat(code);
  }
  return scale;
}

__global__ void WriteFp8KeysKernel(const void* keys, Elem ke, const std::int64_t* slots, std::int64_t n, int dim,
                                   std::uint8_t* cache) {
  const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(kWarps) + (threadIdx.x >> 5);
  if (item >= n || slots[item] < 0) return;
  std::uint8_t* entry = cache + slots[item] * (dim + 4);
  const float scale = QuantizeRow(keys, ke, item * dim, dim, entry, nullptr);
  const int lane = threadIdx.x & 31;
  if (lane < 4) entry[dim + lane] = static_cast<std::uint8_t>(__float_as_uint(scale) >> (8 * lane));
}

// Per (row, head): coef = weight_scale · w · q_scale (q_scale 1 for an exact cache) and q as the
// dot products see it: e4m3 codes for the tensor-core kernel, fp32 values (decoded codes for an
// fp8 cache) for the fp32 kernel.
__global__ void PrepareQueriesKernel(const void* q, Elem qe, const void* w, Elem we, std::int64_t items, int dim,
                                     float weight_scale, bool fp8, std::uint8_t* codes, float* used, float* coef) {
  const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(kWarps) + (threadIdx.x >> 5);
  if (item >= items) return;
  const int lane = threadIdx.x & 31;
  const std::int64_t base = item * dim;
  float scale = 1.0f;
  if (fp8) {
    scale = QuantizeRow(q, qe, base, dim, codes != nullptr ? codes + base : nullptr,
                        used != nullptr ? used + base : nullptr);
  } else {
    for (int d = lane; d < dim; d += 32) used[base + d] = LoadF(q, base + d, qe);
  }
  if (lane == 0) coef[item] = weight_scale * LoadF(w, item, we) * scale;
}

// Consecutive query rows of one sequence that a block scores together; their scores go to score
// rows slot0 .. slot0 + rows - 1.
struct IndexBlock {
  std::int32_t row0, rows, bt_offset, pos_offset, slot0;
};

struct ScoreArgs {
  const std::uint8_t* q_codes = nullptr;  // tensor-core kernel: [n, heads, 128]
  const float* q_used = nullptr;          // fp32 kernel: [n, heads, dim]
  const float* coef = nullptr;            // [n, heads]
  const void* cache = nullptr;
  int dim = 0, heads = 0, topk = 0;
  const std::int32_t* tables = nullptr;
  const std::int32_t* positions = nullptr;
  const IndexBlock* blocks = nullptr;  // null: a pure decode step, block b is sequence b's row b
  // Key k (an entry of `per` positions) is cache row KeySlot(table, page_entries, table_step, k);
  // a row sees VisibleEntries(position, reach, per) keys (reach in positions).
  int table_width = 0, page_entries = 0, table_step = 1, per = 1, reach = 0;
  int splits = 1, min_chunk = kTileKeys;
  float* scores = nullptr;
  std::int64_t stride = 0;
  std::uint32_t* minmax = nullptr;
};

// The cache row of key `key` (mla_ops.h's EntrySlot): the key lives in table page key / page ·
// step, which holds `page` keys. One key per token: page = page_size, step = 1. Entries of `per`
// positions: page = page_size / per, step = 1 when the page size is a multiple of per, otherwise
// (an entry spans several pages and lives in its first one) page = 1, step = per / page_size.
__device__ __forceinline__ std::int64_t KeySlot(const std::int32_t* table, int page, int step, int key) {
  return static_cast<std::int64_t>(table[key / page * step]) * page + key % page;
}

__device__ __forceinline__ IndexBlock BlockAt(const ScoreArgs& a, int b) {
  if (a.blocks != nullptr) return a.blocks[b];
  return IndexBlock{b, 1, b * a.table_width, b, b};
}

// The keys [x, y) that split blockIdx.x of the block scores (none when y <= x): the block's keys
// end where its furthest-seeing row that needs scores sees, cut into `splits` chunks of whole tiles.
__device__ __forceinline__ int2 SplitRange(const ScoreArgs& a, const IndexBlock& blk, int tile) {
  int key_end = 0;
  for (int t = 0; t < blk.rows; ++t) {
    const int v = VisibleEntries(a.positions[blk.pos_offset + t], a.reach, a.per);
    if (v > a.topk) key_end = max(key_end, v);
  }
  const int chunk = max(a.min_chunk, ((key_end + a.splits - 1) / a.splits + tile - 1) / tile * tile);
  const int begin = static_cast<int>(blockIdx.x) * chunk;
  return make_int2(begin, min(key_end, begin + chunk));
}

// A warp's largest score and largest complement, merged into its row's pair (0 when it scored none).
__device__ __forceinline__ void PublishMinMax(std::uint32_t* mm, std::uint32_t hi, std::uint32_t lo_c) {
  for (int o = 16; o > 0; o >>= 1) {
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, o));
    lo_c = max(lo_c, __shfl_xor_sync(0xffffffffu, lo_c, o));
  }
  if ((threadIdx.x & 31) == 0 && hi != 0) {
    atomicMax(mm, hi);
    atomicMax(mm + 1, lo_c);
  }
}

// Key tile [k0, k0 + 128) as the cache holds it (132 bytes a key) when a page holds a multiple of 4
// keys: a run of 4 keys is 528 contiguous, 16-byte aligned bytes of one page. RunSlots looks up
// the first slot of the run of each of this thread's chunks (-1 past `end`); IssueRuns copies them,
// zeros for -1. The lookups of a tile are issued one tile before its copies, so the table reads'
// latency hides behind a tile of MMAs.
__device__ __forceinline__ void RunSlots(int (&slots)[kChunksPerThread], const std::int32_t* table, int page,
                                         int step, int k0, int end) {
#pragma unroll
  for (int j = 0; j < kChunksPerThread; ++j) {
    const int e = threadIdx.x + j * kThreads, key = k0 + 4 * (e / kRunChunks);
    slots[j] = e < kTileChunks && key < end ? table[key / page * step] * page + key % page : -1;
  }
}
__device__ __forceinline__ void IssueRuns(unsigned char* dst, const std::uint8_t* cache,
                                          const int (&slots)[kChunksPerThread]) {
#pragma unroll
  for (int j = 0; j < kChunksPerThread; ++j) {
    const int e = threadIdx.x + j * kThreads;
    if (e >= kTileChunks) break;
    const int unit = e / kRunChunks, c = e - unit * kRunChunks;
    const bool ok = slots[j] >= 0;
    mla::CpAsync16(dst + unit * 4 * kKeyBytes + 16 * c,
                   ok ? cache + static_cast<std::int64_t>(slots[j]) * kKeyBytes + 16 * c : cache, ok ? 16 : 0);
  }
}

// Any page size: 4-byte copies of every key's 33 words (the table read at the copy).
__device__ __forceinline__ void LoadKeyTileWords(unsigned char* dst, const std::uint8_t* cache,
                                                 const std::int32_t* table, int page, int step, int k0, int end) {
  constexpr int kWords = kKeyBytes / 4;  // 33
  for (int e = threadIdx.x; e < kTileKeys * kWords; e += kThreads) {
    const int i = e / kWords, w = e - i * kWords, key = k0 + i;
    const bool ok = key < end;
    const std::uint8_t* src = cache;
    if (ok) src = cache + KeySlot(table, page, step, key) * kKeyBytes + 4 * w;
    CpAsync4(dst + i * kKeyBytes + 4 * w, src, ok ? 4 : 0);
  }
}

// The tensor-core scoring kernel for 8·NT heads of head_dim 128 (file comment).
// Two blocks a multiprocessor up to 32 heads (128 registers a thread hold their q fragments); 64
// heads' 64 registers of fragments leave room for one.
template <int NT>
__global__ void __launch_bounds__(kThreads, NT >= 8 ? 1 : 2) Fp8ScoreKernel(const ScoreArgs a) {
  extern __shared__ __align__(16) unsigned char tiles[];  // kStages × kTileBytes
  __shared__ __align__(8) float coef[kWarps][8 * NT];     // the block's rows' coefficients
  const IndexBlock blk = BlockAt(a, blockIdx.y);
  const int2 range = SplitRange(a, blk, kTileKeys);
  if (range.x >= range.y) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int rows = blk.rows, mine = warp % rows;  // rows: 1, 2, 4 or 8
  const std::int64_t row = blk.row0 + mine;
  const int visible = VisibleEntries(a.positions[blk.pos_offset + mine], a.reach, a.per);
  const int end = visible > a.topk ? min(visible, range.y) : 0;  // keys this warp's row scores
  float* out = a.scores + static_cast<std::int64_t>(blk.slot0 + mine) * a.stride;

  // B fragments: head 8n + g's codes [32t, 32t + 32), in registers for the whole block; the
  // coefficients in shared memory (two blocks a multiprocessor fit in 128 registers a thread).
  std::uint32_t qf[NT][8];
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const uint4* src = reinterpret_cast<const uint4*>(a.q_codes + (row * a.heads + 8 * n + g) * kDim + 32 * t);
    const uint4 x = src[0], y = src[1];
    qf[n][0] = x.x, qf[n][1] = x.y, qf[n][2] = x.z, qf[n][3] = x.w;
    qf[n][4] = y.x, qf[n][5] = y.y, qf[n][6] = y.z, qf[n][7] = y.w;
  }
  for (int i = threadIdx.x; i < rows * 8 * NT; i += kThreads)
    coef[i / (8 * NT)][i % (8 * NT)] = a.coef[(blk.row0 + i / (8 * NT)) * static_cast<std::int64_t>(a.heads) + i % (8 * NT)];

  const auto* cache = static_cast<const std::uint8_t*>(a.cache);
  const std::int32_t* table = a.tables + blk.bt_offset;
  const bool runs_of_4 = a.page_entries % 4 == 0;
  const int tiles_n = (range.y - range.x + kTileKeys - 1) / kTileKeys;
  // kStages - 1 tiles in flight; `slots` holds the lookups of the next tile to issue.
  int slots[kChunksPerThread];
  auto issue = [&](int tile) {
    unsigned char* dst = tiles + (tile % kStages) * kTileBytes;
    if (runs_of_4)
      IssueRuns(dst, cache, slots);
    else
      LoadKeyTileWords(dst, cache, table, a.page_entries, a.table_step, range.x + tile * kTileKeys, range.y);
  };
  auto lookup = [&](int tile) {
    if (runs_of_4 && tile < tiles_n)
      RunSlots(slots, table, a.page_entries, a.table_step, range.x + tile * kTileKeys, range.y);
  };
  for (int tile = 0; tile < kStages - 1; ++tile) {
    lookup(tile);
    if (tile < tiles_n) issue(tile);
    mla::CpAsyncCommit();
  }
  lookup(kStages - 1);

  std::uint32_t hi = 0, lo_c = 0;
  for (int tile = 0; tile < tiles_n; ++tile) {
    mla::CpAsyncWait<kStages - 2>();  // this tile has landed (the later ones may be in flight)
    __syncthreads();                  // for every thread; and the stage refilled below was read last iteration
    if (tile + kStages - 1 < tiles_n) issue(tile + kStages - 1);
    mla::CpAsyncCommit();
    lookup(tile + kStages);
    const unsigned char* base = tiles + (tile % kStages) * kTileBytes;
    const int k0 = range.x + tile * kTileKeys;
    for (int i = 0; i < rows; ++i) {
      const int mt = warp / rows + i * (kWarps / rows);
      if (k0 + mt * 16 >= end) continue;  // the same for the whole warp
      const unsigned char* ka = base + (mt * 16 + g) * kKeyBytes + 32 * t;
      const unsigned char* kb = ka + 8 * kKeyBytes;
      float acc[NT][4];
#pragma unroll
      for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        // Key rows are 132 bytes: 4-byte aligned only.
        const auto* x = reinterpret_cast<const std::uint32_t*>(ka + 8 * j);
        const auto* y = reinterpret_cast<const std::uint32_t*>(kb + 8 * j);
        const std::uint32_t x0 = x[0], x1 = x[1], y0 = y[0], y1 = y[1];
#pragma unroll
        for (int n = 0; n < NT; ++n) MmaE4m3(acc[n], x0, y0, x1, y1, qf[n][2 * j], qf[n][2 * j + 1]);
      }
      // acc[n]: keys g (0, 1) and g + 8 (2, 3), heads 8n + 2t (0, 2) and 8n + 2t + 1 (1, 3).
      float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const float2 cf = *reinterpret_cast<const float2*>(&coef[mine][8 * n + 2 * t]);
        s0 += cf.x * fmaxf(acc[n][0], 0.0f) + cf.y * fmaxf(acc[n][1], 0.0f);
        s1 += cf.x * fmaxf(acc[n][2], 0.0f) + cf.y * fmaxf(acc[n][3], 0.0f);
      }
      s0 += __shfl_xor_sync(0xffffffffu, s0, 1);
      s1 += __shfl_xor_sync(0xffffffffu, s1, 1);
      s0 += __shfl_xor_sync(0xffffffffu, s0, 2);
      s1 += __shfl_xor_sync(0xffffffffu, s1, 2);
      const int local = mt * 16 + g + (t == 1 ? 8 : 0), key = k0 + local;
      if (t < 2 && key < end) {
        const float score = (t == 0 ? s0 : s1) * *reinterpret_cast<const float*>(base + local * kKeyBytes + kDim);
        out[key] = score;
        const std::uint32_t u = OrderedBits(score);
        hi = max(hi, u);
        lo_c = max(lo_c, ~u);
      }
    }
  }
  PublishMinMax(a.minmax + 2 * (blk.slot0 + mine), hi, lo_c);
}

// The fp32 scoring kernel (exact caches of fp32 or bf16 rows, kKind 0 / 1, and fp8 caches of
// shapes the tensor-core kernel does not take, kKind 2): one row at a time, its q [heads, dim] in
// shared memory (rows padded by one value: lanes of a warp read heads at the same d conflict-free),
// 32 keys a tile decoded to fp32, a warp per key and a lane per head.
template <int kKind>
__global__ void __launch_bounds__(kThreads) GenericScoreKernel(const ScoreArgs a) {
  extern __shared__ float gsm[];
  const int dim = a.dim, heads = a.heads, ld = dim + 1;
  float* qs = gsm;
  float* cf = qs + heads * ld;
  float* ks = cf + heads;
  float* kscale = ks + kGenericKeys * ld;
  const IndexBlock blk = BlockAt(a, blockIdx.y);
  const int2 range = SplitRange(a, blk, kGenericKeys);
  if (range.x >= range.y) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const std::int32_t* table = a.tables + blk.bt_offset;
  const int page = a.page_entries, step = a.table_step, width = kKind == 2 ? dim + 4 : dim;
  for (int r = 0; r < blk.rows; ++r) {
    const std::int64_t row = blk.row0 + r;
    const int visible = VisibleEntries(a.positions[blk.pos_offset + r], a.reach, a.per);
    const int end = visible > a.topk ? min(visible, range.y) : 0;
    if (range.x >= end) continue;
    float* out = a.scores + static_cast<std::int64_t>(blk.slot0 + r) * a.stride;
    __syncthreads();  // the previous row's q is no longer read
    for (int i = threadIdx.x; i < heads * dim; i += kThreads) qs[(i / dim) * ld + i % dim] = a.q_used[row * heads * dim + i];
    for (int i = threadIdx.x; i < heads; i += kThreads) cf[i] = a.coef[row * heads + i];
    std::uint32_t hi = 0, lo_c = 0;
    for (int k0 = range.x; k0 < end; k0 += kGenericKeys) {
      __syncthreads();  // the last tile is no longer read
      for (int i = threadIdx.x; i < kGenericKeys * dim; i += kThreads) {
        const int kk = i / dim, d = i - kk * dim, key = k0 + kk;
        float v = 0.0f;
        if (key < end) {
          const std::int64_t slot = KeySlot(table, page, step, key);
          if constexpr (kKind == 0) v = static_cast<const float*>(a.cache)[slot * width + d];
          if constexpr (kKind == 1) v = __bfloat162float(static_cast<const __nv_bfloat16*>(a.cache)[slot * width + d]);
          if constexpr (kKind == 2) v = E4M3ToFloat(static_cast<const std::uint8_t*>(a.cache)[slot * width + d]);
        }
        ks[kk * ld + d] = v;
      }
      for (int kk = threadIdx.x; kk < kGenericKeys; kk += kThreads) {
        float sc = 1.0f;
        const int key = k0 + kk;
        if (kKind == 2 && key < end) {
          const std::uint8_t* p =
              static_cast<const std::uint8_t*>(a.cache) + KeySlot(table, page, step, key) * width + dim;
          sc = __uint_as_float(p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<std::uint32_t>(p[3]) << 24));
        }
        kscale[kk] = sc;
      }
      __syncthreads();
      for (int kk = warp; kk < kGenericKeys && k0 + kk < end; kk += kWarps) {
        float part = 0.0f;
        const float* kv = ks + kk * ld;
        for (int h = lane; h < heads; h += 32) {
          const float* qh = qs + h * ld;
          float dot = 0.0f;
          for (int d = 0; d < dim; ++d) dot += qh[d] * kv[d];
          part += cf[h] * fmaxf(dot, 0.0f);
        }
        for (int o = 16; o > 0; o >>= 1) part += __shfl_xor_sync(0xffffffffu, part, o);
        if (lane == 0) {
          const float score = part * kscale[kk];
          out[k0 + kk] = score;
          const std::uint32_t u = OrderedBits(score);
          hi = max(hi, u);
          lo_c = max(lo_c, ~u);
        }
      }
    }
    PublishMinMax(a.minmax + 2 * (blk.slot0 + r), hi, lo_c);
  }
}

void CheckIndexCache(const Tensor& cache, const IndexerShape& sh) {
  const bool fp8 = sh.key_format == IndexKeyFormat::kFp8;
  FISSION_CHECK(cache.rank() == 2 && cache.shape[1] == IndexKeyWidth(sh.key_format, sh.head_dim) &&
                    (fp8 ? cache.dtype == DType::kU8 : (cache.dtype == DType::kF32 || cache.dtype == DType::kBF16)),
                "index key cache ", cache.shape.ToString(), " of ", DTypeName(cache.dtype), " for head_dim ",
                sh.head_dim, fp8 ? " (fp8: U8 rows of head_dim + 4 bytes)" : " (exact: fp32 or bf16 rows)");
  FISSION_CHECK(sh.tokens_per_entry >= 1, "index keys of ", sh.tokens_per_entry, " positions");
}

// KeySlot's page and step for the shape (mla_ops.h's EntrySlot, for page sizes and tokens_per_entry
// that divide one another, as the engine's paged classes must: model/memory_spec.h).
struct KeyPaging {
  std::int64_t page_entries = 0, table_step = 1;
};
KeyPaging PagingOf(const IndexerShape& sh) {
  const std::int64_t page = sh.page_size, per = sh.tokens_per_entry;
  FISSION_CHECK(page % per == 0 || per % page == 0, "index keys of ", per, " positions in pages of ", page,
                " (one must divide the other)");
  return per <= page ? KeyPaging{page / per, 1} : KeyPaging{1, per / page};
}

// Whether the tensor-core kernel takes the shape.
bool TensorCoreShape(const IndexerShape& sh) {
  return sh.key_format == IndexKeyFormat::kFp8 && sh.head_dim == kDim &&
         (sh.n_heads == 16 || sh.n_heads == 32 || sh.n_heads == 64);
}

// A host-planned call: the step's positions and tables, and groups of blocks whose score rows fit
// kScoreBudget together.
struct IndexPlan {
  struct Group {
    DeviceMeta blocks, rows;
    int block_count = 0, slots = 0, splits = 1;
  };
  DeviceMeta positions, tables;
  std::vector<Group> groups;
  std::int64_t stride = 0;
  int max_slots = 0;
};

IndexPlan PlanOnHost(CudaContext& ctx, std::span<const SeqAttention> seqs, const IndexerShape& sh, bool tensor_cores) {
  std::vector<std::int32_t> positions, tables;
  const std::int64_t per = sh.tokens_per_entry;
  std::int64_t longest = 1;  // keys a score row holds at most
  for (const SeqAttention& s : seqs) longest = std::max<std::int64_t>(longest, s.kv_len / per);
  IndexPlan plan;
  plan.stride = (longest + 3) / 4 * 4;
  const std::int64_t group_slots = std::max<std::int64_t>(8, kScoreBudget / (plan.stride * 4));
  struct Pending {
    std::vector<IndexBlock> blocks;
    std::vector<dsa::TopkRow> rows;
    int longest = 0;
  };
  std::vector<Pending> pending(1);
  for (const SeqAttention& s : seqs) {
    const auto bt = static_cast<std::int32_t>(tables.size()), pos = static_cast<std::int32_t>(positions.size());
    tables.insert(tables.end(), s.block_table.begin(), s.block_table.end());
    positions.insert(positions.end(), s.query_positions.begin(), s.query_positions.end());
    for (int t = 0; t < s.query_len;) {
      int r = 1;
      while (tensor_cores && r < 8 && t + 2 * r <= s.query_len) r *= 2;
      if (static_cast<std::int64_t>(pending.back().rows.size()) + r > group_slots) pending.emplace_back();
      Pending& p = pending.back();
      const auto slot0 = static_cast<std::int32_t>(p.rows.size());
      p.blocks.push_back({s.query_start + t, r, bt, pos + t, slot0});
      for (int i = 0; i < r; ++i) {
        p.rows.push_back({s.query_start + t + i, pos + t + i});
        p.longest = std::max(p.longest, static_cast<int>((s.query_positions[t + i] + 1) / per));
      }
      t += r;
    }
  }
  plan.positions = ctx.Upload(std::span<const std::int32_t>(positions));
  plan.tables = ctx.Upload(std::span<const std::int32_t>(tables));
  const int min_chunk = tensor_cores ? kMinChunk : kGenericMinChunk;
  for (Pending& p : pending) {
    if (p.rows.empty()) continue;
    // Blocks seeing the most keys first: the longest start early.
    auto reach = [&](const IndexBlock& b) {
      return *std::max_element(positions.begin() + b.pos_offset, positions.begin() + b.pos_offset + b.rows);
    };
    std::stable_sort(p.blocks.begin(), p.blocks.end(),
                     [&](const IndexBlock& x, const IndexBlock& y) { return reach(x) > reach(y); });
    IndexPlan::Group g;
    g.block_count = static_cast<int>(p.blocks.size());
    g.slots = static_cast<int>(p.rows.size());
    g.splits = PickSplits(g.block_count, std::max<std::int64_t>(1, (p.longest + min_chunk - 1) / min_chunk),
                          ctx.sm_count());
    g.blocks = ctx.Upload(std::span<const IndexBlock>(p.blocks));
    g.rows = ctx.Upload(std::span<const dsa::TopkRow>(p.rows));
    plan.max_slots = std::max(plan.max_slots, g.slots);
    plan.groups.push_back(std::move(g));
  }
  return plan;
}

// Launches `kernel` with `bytes` of dynamic shared memory, raising its limit to the device's
// once per device (a function attribute is per device; the eager call before a capture sets it).
template <auto kKernel>
void LaunchWithSmem(CudaContext& ctx, dim3 grid, std::size_t bytes, const ScoreArgs& a) {
  static std::atomic<std::uint64_t> configured{0};
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0) {
    int optin = 0;
    cudaFuncAttributes attributes{};
    FISSION_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device()));
    FISSION_CUDA(cudaFuncGetAttributes(&attributes, kKernel));  // its static shared memory counts too
    FISSION_CUDA(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      optin - static_cast<int>(attributes.sharedSizeBytes)));
  }
  kKernel<<<grid, kThreads, bytes, ctx.stream()>>>(a);
  FISSION_LAUNCHED();
}

void LaunchScores(CudaContext& ctx, const ScoreArgs& a, int block_count, bool tensor_cores, DType cache_dtype) {
  const dim3 grid(static_cast<unsigned>(a.splits), static_cast<unsigned>(block_count));
  if (tensor_cores) {
    constexpr std::size_t kBytes = kStages * kTileBytes;
    if (a.heads == 16) return LaunchWithSmem<Fp8ScoreKernel<2>>(ctx, grid, kBytes, a);
    if (a.heads == 32) return LaunchWithSmem<Fp8ScoreKernel<4>>(ctx, grid, kBytes, a);
    return LaunchWithSmem<Fp8ScoreKernel<8>>(ctx, grid, kBytes, a);
  }
  const std::size_t bytes = sizeof(float) * ((static_cast<std::size_t>(a.heads) + kGenericKeys) * (a.dim + 1) + a.heads +
                                             kGenericKeys);
  FISSION_CHECK(bytes <= 96 * 1024, "the fp32 indexer kernel holds heads × (head_dim + 1) values of q in shared memory: ",
                a.heads, " × ", a.dim, " is too many");
  if (cache_dtype == DType::kF32) return LaunchWithSmem<GenericScoreKernel<0>>(ctx, grid, bytes, a);
  if (cache_dtype == DType::kBF16) return LaunchWithSmem<GenericScoreKernel<1>>(ctx, grid, bytes, a);
  LaunchWithSmem<GenericScoreKernel<2>>(ctx, grid, bytes, a);
}

}  // namespace

void WriteIndexKeys(CudaContext& ctx, const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                    const IndexerShape& sh) {
  CheckIndexCache(cache, sh);
  FISSION_CHECK(keys.numel() == static_cast<std::int64_t>(slots.size()) * sh.head_dim, "index keys ",
                keys.shape.ToString(), " for ", slots.size(), " slots");
  if (sh.key_format == IndexKeyFormat::kExact) return WriteKv(ctx, keys, slots, cache);
  for (std::int64_t s : slots) FISSION_CHECK(s >= -1 && s < cache.shape[0], "index key slot ", s);
  if (slots.empty()) return;
  DeviceMeta dev = ctx.Upload(slots);
  const auto n = static_cast<std::int64_t>(slots.size());
  WriteFp8KeysKernel<<<Blocks(n, kWarps), kThreads, 0, ctx.stream()>>>(
      keys.data, ElemOf(keys), dev.ptr<std::int64_t>(), n, static_cast<int>(sh.head_dim), cache.ptr<std::uint8_t>());
  FISSION_LAUNCHED();
}

void IndexerTopK(CudaContext& ctx, const Tensor& q, const Tensor& weights, const Tensor& cache,
                 std::span<const SeqAttention> seqs, const IndexerShape& sh, const Tensor& topk) {
  CheckIndexCache(cache, sh);
  const std::int64_t heads = sh.n_heads, dim = sh.head_dim, k = sh.topk;
  FISSION_CHECK(heads > 0 && dim > 0 && q.rank() >= 1 && q.shape[-1] == dim && q.numel() % (heads * dim) == 0,
                "IndexerTopK q", q.shape.ToString(), " for ", heads, " heads of ", dim);
  const std::int64_t n = q.numel() / (heads * dim);
  FISSION_CHECK(weights.numel() == n * heads, "IndexerTopK weights ", weights.shape.ToString(), " for ", n, " rows");
  FISSION_CHECK(topk.dtype == DType::kI32 && topk.rank() == 2 && topk.shape[0] == n && topk.shape[1] == k,
                "IndexerTopK topk", topk.shape.ToString(), " for ", n, " rows of ", k);
  static_assert(dsa::kMaxTopk == kCudaMaxIndexTopk, "the loader's limit is the kernel's");
  FISSION_CHECK(k >= 1 && k <= dsa::kMaxTopk && sh.page_size > 0, "IndexerTopK topk ", k, " page ", sh.page_size);
  FISSION_CHECK(cache.shape[0] < (std::int64_t{1} << 31), "index key cache too large for 32-bit slots");
  const KeyPaging paging = PagingOf(sh);
  const std::int64_t per = sh.tokens_per_entry;
  std::int64_t rows = 0;
  for (const SeqAttention& s : seqs) {
    FISSION_CHECK(s.query_start >= 0 && s.query_start + s.query_len <= n, "sequence rows out of range");
    FISSION_CHECK(static_cast<std::int32_t>(s.query_positions.size()) == s.query_len, "query positions");
    FISSION_CHECK(static_cast<std::int64_t>(s.block_table.size()) * sh.page_size >= s.kv_len, "block table of ",
                  s.block_table.size(), " pages cannot hold ", s.kv_len, " tokens");
    for (std::int32_t p : s.query_positions) FISSION_CHECK(p >= 0 && p < s.kv_len, "query position ", p);
    for (std::int32_t page : s.block_table)
      FISSION_CHECK(page >= 0 && (page + 1) * paging.page_entries <= cache.shape[0], "page ", page,
                    " outside the cache");
    rows += s.query_len;
  }
  if (rows == 0) return;
  const bool fp8 = sh.key_format == IndexKeyFormat::kFp8, tensor_cores = TensorCoreShape(sh);

  // Queries: coefficients, and codes (tensor cores) or fp32 values.
  Buffer codes, used, coef(DType::kF32, Shape{n, heads}, ctx.allocator());
  if (tensor_cores)
    codes = Buffer(DType::kU8, Shape{n * heads * dim}, ctx.allocator());
  else
    used = Buffer(DType::kF32, Shape{n, heads, dim}, ctx.allocator());
  PrepareQueriesKernel<<<Blocks(n * heads, kWarps), kThreads, 0, ctx.stream()>>>(
      q.data, ElemOf(q), weights.data, ElemOf(weights), n * heads, static_cast<int>(dim), sh.weight_scale, fp8,
      tensor_cores ? codes.ptr<std::uint8_t>() : nullptr, tensor_cores ? nullptr : used.ptr<float>(), coef.ptr<float>());
  FISSION_LAUNCHED();

  ScoreArgs a;
  a.q_codes = tensor_cores ? codes.ptr<std::uint8_t>() : nullptr;
  a.q_used = tensor_cores ? nullptr : used.ptr<float>();
  a.coef = coef.ptr<float>();
  a.cache = cache.data;
  a.dim = static_cast<int>(dim);
  a.heads = static_cast<int>(heads);
  a.topk = static_cast<int>(k);
  a.page_entries = static_cast<int>(paging.page_entries);
  a.table_step = static_cast<int>(paging.table_step);
  a.per = static_cast<int>(per);
  a.min_chunk = tensor_cores ? kMinChunk : kGenericMinChunk;
  dsa::TopkArgs t;
  t.topk = static_cast<int>(k);
  t.per = a.per;
  t.out = topk.ptr<std::int32_t>();

  const char* skip = std::getenv("FISSION_DSA_SKIP_TOPK");
  const bool skip_topk = skip != nullptr && skip[0] == '1';
  auto run = [&](int block_count, int slots, Buffer& scores, Buffer& minmax) {
    a.scores = scores.ptr<float>();
    a.minmax = minmax.ptr<std::uint32_t>();
    FISSION_CUDA(cudaMemsetAsync(minmax.tensor().data, 0, static_cast<std::size_t>(slots) * 2 * sizeof(std::uint32_t),
                                 ctx.stream()));
    LaunchScores(ctx, a, block_count, tensor_cores, cache.dtype);
    t.scores = a.scores;
    t.stride = a.stride;
    t.minmax = a.minmax;
    t.positions = a.positions;
    t.reach = a.reach;
    t.slots = slots;
    // FISSION_DSA_SKIP_TOPK=1 scores without selecting: the benchmark's measure of the selection's
    // share (bench/cuda/dsa_bench.cc); never set in serving.
    if (skip_topk) return;
    dsa::LaunchTopk(ctx, t);
  };

  if (PureDecode(seqs, n)) {
    // Positions and tables through the step's input block; key ranges cut on the device.
    std::int64_t position_width = 0, table_width = 0;
    DeviceMeta positions = UploadPerSequence(ctx, seqs, [](const SeqAttention& s) { return s.query_positions; },
                                             &position_width);
    DeviceMeta tables = UploadPerSequence(ctx, seqs, [](const SeqAttention& s) { return s.block_table; }, &table_width);
    FISSION_CHECK(position_width == 1 && table_width * sh.page_size < INT_MAX, "decode positions/tables");
    const std::int64_t reach = table_width * sh.page_size, keys = std::max<std::int64_t>(1, reach / per);
    a.positions = positions.ptr<std::int32_t>();
    a.tables = tables.ptr<std::int32_t>();
    a.table_width = static_cast<int>(table_width);
    a.reach = static_cast<int>(reach);
    a.stride = (keys + 3) / 4 * 4;
    a.splits = PickSplits(n, std::clamp<std::int64_t>((keys + a.min_chunk - 1) / a.min_chunk, 1, kMaxDecodeSplits),
                          ctx.sm_count());
    Buffer scores(DType::kF32, Shape{n, a.stride}, ctx.allocator());
    Buffer minmax(DType::kI32, Shape{n, 2}, ctx.allocator());
    run(static_cast<int>(n), static_cast<int>(n), scores, minmax);
    return;
  }
  // The plan depends on the kernel, topk, the page size and the positions a key covers.
  const StepMemoKey memo{"dsa.indexer", seqs.data(), seqs.size(), 2 * per + (tensor_cores ? 1 : 0), k, sh.page_size};
  const IndexPlan& plan = ctx.StepMemo<IndexPlan>(memo, seqs[0].query_positions.data(),
                                                  [&] { return PlanOnHost(ctx, seqs, sh, tensor_cores); });
  a.positions = plan.positions.ptr<std::int32_t>();
  a.tables = plan.tables.ptr<std::int32_t>();
  a.reach = INT_MAX;
  a.stride = plan.stride;
  Buffer scores(DType::kF32, Shape{plan.max_slots, plan.stride}, ctx.allocator());
  Buffer minmax(DType::kI32, Shape{plan.max_slots, 2}, ctx.allocator());
  for (const IndexPlan::Group& g : plan.groups) {
    a.blocks = g.blocks.ptr<const IndexBlock>();
    a.splits = g.splits;
    t.rows = g.rows.ptr<const dsa::TopkRow>();
    run(g.block_count, g.slots, scores, minmax);
  }
}

}  // namespace fission::kernels::cuda
