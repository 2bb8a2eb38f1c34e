// DeepSeek-V4's compressors and its attention on CUDA (kernels/v4_ops.h; the CPU reference is
// kernels/cpu/cpu_v4_attention.cc), fp32 throughout: results differ from the CPU's by summation
// order and exp's last bits only. At head_dim 512 over a ring and entries stored as bf16 or FP8,
// V4Attention launches the tensor-core kernel of v4_flash.cu instead (V4FlashTakes, a rule on
// shapes and storage); the host side below, the splits and their merge are the same for both.
//
// Compress: one block per closed window, a thread per channel, computing the CPU's softmax over
// the window's slots (maximum, sum of exponentials, weighted sum). A slot's row comes from its
// position: the step's row for a new position, the state slot's entry for an earlier one.
// UpdateCompressorState: one block per step row, copying its kv and gate rows to its state entry.
//
// Attention (MQA: the one KV head is key and value; head_dim a multiple of 4 up to 512):
//   grid     1-D, one block per (query row, split of the row's keys, group of 16 heads).
//   block    128 threads, 4 heads a warp. Eight lanes share a head: lane l owns the float4 chunks
//            l, l + 8, ... of head_dim, so q and the output accumulator stay in registers (64
//            floats each at 512) and a dot product ends with three shuffles. A key chunk is read
//            by a warp's four heads at once (a broadcast). All 128 threads decode, whatever the
//            heads.
//   keys     a row's key list is its window positions (p - window, p], then its entries (every
//            visible one, or the selection up to its first -1), resolved on the device from the
//            step plan's row records (V4QueryRow) and the step's block tables. Tiles of
//            16 keys are decoded to fp32 in shared memory (16 × head_dim floats, 32 KB at 512,
//            padded with zeros to the instantiation's width) once for every head of the block.
//   softmax  online, in base 2, once per tile: the 16 scores of a head go to shared memory, the
//            running maximum, sum and accumulator are rescaled once. The sink is a key without a
//            value: split 0 starts with maximum = sink and sum = 1.
//   splits   when rows × head groups cannot fill the device (decode), a row's key list is split
//            (one tile of 16 keys a split at least); each split writes its normalised output and base-2
//            log-sum-exp, which mla::MergeKernel combines (a split that saw no key has weight 0).
//            In a uniform step (decode, verify) the splits follow from the shape alone (the rows,
//            and the longest key list the layer can have), so the step is capturable and a replay
//            sums in the order an eager step does; otherwise from the step's longest key list.
// Per tile: barrier 1 after the key list is resolved (every thread is then done with the previous
// tile), barrier 2 after the decode; the loop bounds depend on the row only, so every thread of
// the block takes both. 168 registers at head_dim 512 (three blocks a multiprocessor).
#include <cuda_bf16.h>

#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_v4.h"
#include "kernels/cuda/mla_flash.cuh"
#include "kernels/cuda/mla_host.h"
#include "kernels/cuda/v4_attention.cuh"
#include "kernels/cuda/v4_storage.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kCompressThreads = 128, kCopyThreads = 128;

// ---- Compressors ----------------------------------------------------------------------------------

struct CompressArgs {
  const float* kv;
  const float* gate;
  const float* ape;
  const float* state;
  const ClosedWindow* windows;
  int ratio, head_dim, width, state_positions;
  bool overlap;
  float* pooled;
};

// Slot j of a window (the CPU's Slot): its kv and gate rows, the channel offset of its half and
// its ape row.
struct CompressSlot {
  const float* kv;
  const float* gate;
  int half, ape_row;
};

__device__ __forceinline__ CompressSlot SlotOf(const CompressArgs& a, const ClosedWindow& w, int prev, int j) {
  const bool earlier = j < prev;  // window w - 1's first halves (overlap only)
  const int k = earlier ? j : j - prev;
  const int pos = (earlier ? w.window - 1 : w.window) * a.ratio + k;
  CompressSlot s;
  s.half = a.overlap && !earlier ? a.head_dim : 0;
  s.ape_row = k;
  if (pos >= w.first_new) {
    const std::int64_t row = static_cast<std::int64_t>(w.token_start + pos - w.first_new) * a.width;
    s.kv = a.kv + row;
    s.gate = a.gate + row;
  } else {
    s.kv = a.state + (static_cast<std::int64_t>(w.state_slot) * a.state_positions + pos % a.state_positions) * 2 * a.width;
    s.gate = s.kv + a.width;
  }
  return s;
}

__global__ void CompressKernel(const CompressArgs a) {
  const ClosedWindow w = a.windows[blockIdx.x];
  float* out = a.pooled + static_cast<std::int64_t>(blockIdx.x) * a.head_dim;
  if (w.window < 0) {  // a place kept for a window that does not close
    for (int ch = threadIdx.x; ch < a.head_dim; ch += blockDim.x) out[ch] = 0.0f;
    return;
  }
  const int prev = a.overlap && w.window > 0 ? a.ratio : 0;  // an overlapping entry 0 has no first half
  const int slots = prev + a.ratio;
  for (int ch = threadIdx.x; ch < a.head_dim; ch += blockDim.x) {
    auto logit = [&](const CompressSlot& s) { return s.gate[s.half + ch] + a.ape[s.ape_row * a.width + s.half + ch]; };
    float top = -INFINITY;
    for (int j = 0; j < slots; ++j) top = fmaxf(top, logit(SlotOf(a, w, prev, j)));
    float sum = 0.0f;
    for (int j = 0; j < slots; ++j) sum += expf(logit(SlotOf(a, w, prev, j)) - top);
    float acc = 0.0f;
    for (int j = 0; j < slots; ++j) {
      const CompressSlot s = SlotOf(a, w, prev, j);
      acc += s.kv[s.half + ch] * (expf(logit(s) - top) / sum);
    }
    out[ch] = acc;
  }
}

// Block `row`: the step row's kv and gate into its state entry (none for -1).
__global__ void UpdateStateKernel(const float* kv, const float* gate, const std::int64_t* slots, int width,
                                  float* state) {
  const std::int64_t entry = slots[blockIdx.x];
  if (entry < 0) return;
  const std::int64_t src = static_cast<std::int64_t>(blockIdx.x) * width;
  float* dst = state + entry * 2 * width;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    dst[i] = kv[src + i];
    dst[width + i] = gate[src + i];
  }
}

// kv and gate [tokens, width] fp32.
void CheckProjections(const Tensor& kv, const Tensor& gate, const CompressorShape& sh, const char* op) {
  FISSION_CHECK(kv.rank() == 2 && kv.shape[1] == sh.width() && kv.dtype == DType::kF32 && gate.shape == kv.shape &&
                    gate.dtype == DType::kF32,
                op, ": kv ", kv.shape.ToString(), " and gate ", gate.shape.ToString(), " must be fp32 [tokens, ",
                sh.width(), "]");
}

// The state [slots · state_positions, 2·width] fp32.
void CheckState(const Tensor& state, const CompressorShape& sh, const char* op) {
  FISSION_CHECK(state.rank() == 2 && state.shape[1] == 2 * sh.width() && state.dtype == DType::kF32, op,
                ": compressor state ", state.shape.ToString(), " ", DTypeName(state.dtype), " must be fp32 [slots · ",
                sh.state_positions(), ", ", 2 * sh.width(), "]");
}

// The state row of position p of window w, checked to be kept there (as the CPU's Find).
void CheckStatePosition(const ClosedWindow& w, std::int64_t p, const Tensor& state, const CompressorShape& sh) {
  const std::int64_t keep = sh.state_positions();
  FISSION_CHECK(w.state_slot >= 0 && p >= w.first_new - keep && (w.state_slot + 1) * keep <= state.shape[0],
                "V4Compress: compressor state for position ", p, " (first new position ", w.first_new, ", state slot ",
                w.state_slot, ", ", state.shape[0] / keep, " slots)");
}

// ---- Attention --------------------------------------------------------------------------------

constexpr int kLanesPerHead = 8, kHeadsPerWarp = 32 / kLanesPerHead, kHeadsPerBlock = 16;
constexpr int kThreads = 32 * kHeadsPerBlock / kHeadsPerWarp;  // 128, whatever the heads: all decode
constexpr int kChunksInFlight = 4;  // key chunks a thread loads at once
constexpr int kTile = 16;  // keys decoded into shared memory at a time: kTile·8·kChunks float4, kChunks a thread
// A split's key range at least: one tile. A block works through its tiles alone (4 warps, one
// per scheduler: little latency hidden), so a decode row's keys are cut fine enough to spread over
// the device: a batch-1 sliding layer's 128 keys take 4 × 8 blocks of one tile each (with four
// tiles a split they took 8 blocks and the call about 80 µs on the H200, by the op timer).
constexpr int kMinKeysPerSplit = kTile;
// The splits of an HCA layer's uniform step: its entries grow with the context, so a bound of its
// own, few enough that short contexts leave few splits empty.
constexpr int kMaxHcaDecodeSplits = 16;
constexpr int kMaxHeadDim = 512;
constexpr float kLog2e = 1.4426950408889634f;

using AttentionArgs = V4AttentionArgs;

// Values [c, c + 4) of a key (c a multiple of 4, below head_dim).
// Exact rows are read with one vector load a chunk (16 bytes of fp32, 8 of bf16: c is a multiple of
// 4 and so is the row width).
__device__ __forceinline__ float4 KeyChunk(const AttentionArgs& a, std::int8_t kind, std::int64_t slot, int c) {
  if (kind == kStepKey) return *reinterpret_cast<const float4*>(a.kv + slot * a.head_dim + c);
  if (kind == kNoKey) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const V4StoredRows& rows = kind == kRingKey ? a.ring : a.entries;
  if (!rows.fp8 && rows.elem == Elem::kF32)
    return *reinterpret_cast<const float4*>(static_cast<const float*>(rows.data) + slot * rows.stride + c);
  if (!rows.fp8) {
    const uint2 h = *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(rows.data) + slot * rows.stride + c);
    return make_float4(__uint_as_float(h.x << 16), __uint_as_float(h.x & 0xFFFF0000u), __uint_as_float(h.y << 16),
                       __uint_as_float(h.y & 0xFFFF0000u));
  }
  if (rows.fp8 && c + 4 <= rows.nope) {  // four codes of one block of 64
    const auto* entry = static_cast<const std::uint8_t*>(rows.data) + slot * rows.stride;
    const float scale = DecodeUe8m0(entry[rows.nope + c / static_cast<int>(kV4Fp8Block)]);
    return make_float4(DecodeE4m3(entry[c]) * scale, DecodeE4m3(entry[c + 1]) * scale,
                       DecodeE4m3(entry[c + 2]) * scale, DecodeE4m3(entry[c + 3]) * scale);
  }
  return make_float4(V4StoredValue(rows, slot, c), V4StoredValue(rows, slot, c + 1), V4StoredValue(rows, slot, c + 2),
                     V4StoredValue(rows, slot, c + 3));
}

// acc += x * y, lane by lane.
__device__ __forceinline__ void Fma4(const float4& x, const float4& y, float4& acc) {
  acc.x = fmaf(x.x, y.x, acc.x);
  acc.y = fmaf(x.y, y.y, acc.y);
  acc.z = fmaf(x.z, y.z, acc.z);
  acc.w = fmaf(x.w, y.w, acc.w);
}

__device__ __forceinline__ void Axpy4(float p, const float4& k, float4& o) {
  o.x = fmaf(p, k.x, o.x);
  o.y = fmaf(p, k.y, o.y);
  o.z = fmaf(p, k.z, o.z);
  o.w = fmaf(p, k.w, o.w);
}

// kChunks: float4 chunks per lane, head_dim ≤ 32·kChunks (key rows are padded to that with zeros).
template <int kChunks>
__global__ void __launch_bounds__(kThreads, 3) V4AttentionKernel(const AttentionArgs a) {
  constexpr int kRow4 = kLanesPerHead * kChunks;  // a key row in float4 chunks
  static_assert(kTile * kRow4 == kThreads * kChunks, "a tile is kChunks chunks a thread");
  extern __shared__ float4 keys4[];                                 // [kTile][kRow4]
  __shared__ std::int64_t key_slot[kTile];
  __shared__ std::int8_t key_kind[kTile];
  __shared__ unsigned tile_valid;  // bit t: key t of the tile exists (its score counts)
  __shared__ int sel_count;
  __shared__ float head_scores[kHeadsPerBlock][kTile + 1];  // padded: a warp's four heads in four banks

  const int group = blockIdx.x % a.head_groups, rest = blockIdx.x / a.head_groups;
  const int split = rest % a.splits;
  const V4QueryRow r = a.rows[rest / a.splits];
  const int tid = threadIdx.x, lane8 = tid % kLanesPerHead;
  const int head = group * kHeadsPerBlock + tid / kLanesPerHead;
  const bool head_ok = head < a.heads;
  float* scores = head_scores[tid / kLanesPerHead];  // this head's scores of the tile (base 2)

  const V4RowKeys keys = KeysOfRow(a, r, &sel_count);
  const int total = keys.total;
  const int chunk = ((total + a.splits - 1) / a.splits + kTile - 1) / kTile * kTile;
  const int kb = min(total, split * chunk), ke = min(total, kb + chunk);

  float4 q[kChunks], o[kChunks];
  const std::int64_t qo_row = (static_cast<std::int64_t>(r.row) * a.heads + head) * a.head_dim;
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = 4 * (lane8 + kLanesPerHead * i);
    const bool in = head_ok && c < a.head_dim;  // head_dim % 4 == 0: a chunk is all in or all out
    q[i] = in ? make_float4(a.q[qo_row + c], a.q[qo_row + c + 1], a.q[qo_row + c + 2], a.q[qo_row + c + 3])
              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    o[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  // Running maximum (base 2) and sum; the sink counts once, in split 0.
  float m = -INFINITY, l = 0.0f;
  if (split == 0 && head_ok) {
    m = a.sinks[head] * kLog2e;
    l = 1.0f;
  }

  for (int k0 = kb; k0 < ke; k0 += kTile) {
    // Every thread is past the previous tile's decode (barrier 2), so the key list may change.
    if (tid < 32) {
      std::int8_t kind = kNoKey;
      std::int64_t slot = 0;
      if (tid < kTile && k0 + tid < ke) ResolveKey(a, r, keys, k0 + tid, EntryOfKey(keys, k0 + tid), &kind, &slot);
      if (tid < kTile) {
        key_kind[tid] = kind;
        key_slot[tid] = slot;
      }
      const unsigned valid = __ballot_sync(0xffffffffu, kind != kNoKey);
      if (tid == 0) tile_valid = valid;
    }
    __syncthreads();  // 1: the key list is resolved, and every thread is done with the last tile's keys
    const unsigned valid = tile_valid;
    // Thread tid decodes float4 chunks tid + 128·j of the tile, four at a time: the four loads go
    // out before any store to shared memory, so they are in flight together (stored as each came
    // back, a tile took a memory round trip per chunk); more would take registers that q and the
    // accumulator hold.
#pragma unroll 1
    for (int j0 = 0; j0 < kChunks; j0 += kChunksInFlight) {
      float4 v[kChunksInFlight];
#pragma unroll
      for (int u = 0; u < kChunksInFlight; ++u) {
        const int g = tid + kThreads * (j0 + u), t = g / kRow4, c = 4 * (g % kRow4);
        v[u] = j0 + u < kChunks && c < a.head_dim ? KeyChunk(a, key_kind[t], key_slot[t], c)
                                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kChunksInFlight; ++u)
        if (j0 + u < kChunks) keys4[tid + kThreads * (j0 + u)] = v[u];
    }
    __syncthreads();  // 2: the tile is decoded

    // Scores scale·log2e·q·k_t (the same in each of the head's eight lanes), kept for the tile.
#pragma unroll 1
    for (int t = 0; t < kTile; ++t) {
      const float4* k = keys4 + t * kRow4 + lane8;
      float4 part = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // four independent sums
#pragma unroll
      for (int i = 0; i < kChunks; ++i) Fma4(q[i], k[kLanesPerHead * i], part);
      float acc = (part.x + part.y) + (part.z + part.w);
#pragma unroll
      for (int off = 1; off < kLanesPerHead; off <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
      if (lane8 == 0) scores[t] = (valid >> t) & 1u ? acc * a.scale_log2 : -INFINITY;
    }
    __syncwarp();  // the head's scores are visible to its lanes
    float top = m;
#pragma unroll
    for (int t = 0; t < kTile; ++t) top = fmaxf(top, scores[t]);
    const float base = top == -INFINITY ? 0.0f : top;  // nothing seen yet: every weight is 0
    const float alpha = exp2f(m - base);
    m = top;
    l *= alpha;
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      o[i].x *= alpha;
      o[i].y *= alpha;
      o[i].z *= alpha;
      o[i].w *= alpha;
    }
#pragma unroll 1
    for (int t = 0; t < kTile; ++t) {
      const float pt = exp2f(scores[t] - base);
      l += pt;
      const float4* k = keys4 + t * kRow4 + lane8;
#pragma unroll
      for (int i = 0; i < kChunks; ++i) Axpy4(pt, k[kLanesPerHead * i], o[i]);
    }
  }

  if (!head_ok) return;  // past the last barrier
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float* dst = a.out + qo_row;
  if (a.splits > 1) {
    const std::int64_t prow = split * a.total_rows + static_cast<std::int64_t>(r.row) * a.heads + head;
    if (lane8 == 0) a.part_lse[prow] = l > 0.0f ? m + log2f(l) : -INFINITY;
    if (l == 0.0f) return;  // weight 0: the merge does not read it
    dst = a.part_o + prow * a.head_dim;
  }
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int c = 4 * (lane8 + kLanesPerHead * i);
    if (c >= a.head_dim) continue;
    dst[c] = o[i].x * inv;
    dst[c + 1] = o[i].y * inv;
    dst[c + 2] = o[i].z * inv;
    dst[c + 3] = o[i].w * inv;
  }
}

using AttentionKernelFn = void (*)(AttentionArgs);

// The instantiation for head_dim and its chunks per lane.
AttentionKernelFn PickAttentionKernel(std::int64_t head_dim, int* chunks) {
  *chunks = 1;
  while (32 * *chunks < head_dim) *chunks *= 2;
  switch (*chunks) {
    case 1: return V4AttentionKernel<1>;
    case 2: return V4AttentionKernel<2>;
    case 4: return V4AttentionKernel<4>;
    case 8: return V4AttentionKernel<8>;
    default: return V4AttentionKernel<16>;
  }
}

// Resident blocks of `kernel` a multiprocessor holds, asked once per instantiation (one device
// type per process): the query costs host time at every layer of every step.
int BlocksPerSm(AttentionKernelFn kernel, std::size_t smem) {
  static std::mutex mutex;
  static std::map<AttentionKernelFn, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(kernel);
  if (it == known.end()) {
    int per_sm = 1;
    FISSION_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
    it = known.emplace(kernel, std::max(per_sm, 1)).first;
  }
  return it->second;
}

// The step's query rows checked against the tensors, and the longest key list a row has (in a
// uniform step a bound from the layer's shape alone).
std::int64_t CheckQueries(const V4Queries& queries, std::int64_t n, const Tensor& kv, const Tensor& window_kv,
                          const Tensor& entries, bool selected, std::int64_t sel_width, const V4AttentionShape& sh,
                          std::int64_t min_keys_per_split) {
  const std::int64_t win = sh.window, width = queries.table_width;
  FISSION_CHECK(sh.ratio == 0 || (width > 0 && static_cast<std::int64_t>(queries.tables.size()) % width == 0),
                "V4Attention: block tables of ", queries.tables.size(), " pages at width ", width);
  const std::int64_t per_page = sh.ratio > 0 ? std::max<std::int64_t>(1, sh.page_size / sh.ratio) : 1;
  if (sh.ratio > 0)
    for (std::int32_t page : queries.tables)
      FISSION_CHECK(page >= 0 && (page + 1) * per_page <= entries.shape[0], "V4Attention: page ", page,
                    " outside the entries cache of ", entries.shape[0], " entries (", per_page, " a page)");
  std::int64_t longest = 0;
  for (const V4QueryRow& r : queries.rows) {
    const std::int64_t p = r.position;
    FISSION_CHECK(r.row >= 0 && r.row < n && p >= 0 && r.first_new >= 0 && r.first_new <= p && r.token_start >= 0 &&
                      r.token_start + (p - r.first_new) < kv.shape[0],
                  "V4Attention: query row ", r.row, " of ", n, " at position ", p, " (first new position ", r.first_new,
                  ", first key row ", r.token_start, " of ", kv.shape[0], ")");
    if (sh.ratio > 0)
      FISSION_CHECK(r.table >= 0 && (r.table + 1) * width <= static_cast<std::int64_t>(queries.tables.size()) &&
                        width * sh.page_size > p,
                    "V4Attention: block table ", r.table, " of ", width, " pages cannot hold position ", p);
    if (std::max<std::int64_t>(0, p - win + 1) < r.first_new) {  // the window reaches before the step: the ring
      FISSION_CHECK(r.ring_base >= 0 && window_kv.data != nullptr, "V4Attention: a sliding window without a state slot");
      FISSION_CHECK(r.ring_base + win <= window_kv.shape[0], "V4Attention: ring rows from ", r.ring_base,
                    " outside the window ring of ", window_kv.shape[0], " rows");
    }
    const std::int64_t entry_keys = sh.ratio == 0 ? 0 : selected ? sel_width : (p + 1) / sh.ratio;
    longest = std::max(longest, std::min<std::int64_t>(win, p + 1) + entry_keys);
  }
  if (!queries.uniform) return longest;
  // The window and the selection's width (CSA), or (HCA, whose entries grow with the context)
  // kMaxHcaDecodeSplits splits' worth.
  if (sh.ratio > 0 && !selected) return kMaxHcaDecodeSplits * min_keys_per_split;
  return win + sel_width;
}

}  // namespace

void V4Compress(CudaContext& ctx, const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                std::span<const ClosedWindow> windows, const CompressorShape& sh, const Tensor& pooled) {
  const std::int64_t d = sh.head_dim, width = sh.width(), r = sh.ratio;
  CheckProjections(kv, gate, sh, "V4Compress");
  FISSION_CHECK(r > 0 && d > 0 && ape.shape == Shape({r, width}) && ape.dtype == DType::kF32, "V4Compress: ape ",
                ape.shape.ToString(), " must be fp32 [", r, ", ", width, "]");
  FISSION_CHECK(pooled.shape == Shape({static_cast<std::int64_t>(windows.size()), d}) && pooled.dtype == DType::kF32,
                "V4Compress: pooled ", pooled.shape.ToString(), " must be fp32 [", windows.size(), ", ", d, "]");
  if (windows.empty()) return;
  bool state_checked = false;  // the state is checked when a window reads it
  for (const ClosedWindow& w : windows) {
    if (w.window < 0) continue;
    const std::int64_t begin = (sh.overlap && w.window > 0 ? w.window - 1 : w.window) * r, end = (w.window + 1) * r;
    FISSION_CHECK(w.first_new >= 0 && w.token_start >= 0 && end - 1 >= w.first_new &&
                      w.token_start + (end - 1 - w.first_new) < kv.shape[0],
                  "V4Compress: window ", w.window, " ending at position ", end, " with first new position ",
                  w.first_new, " at row ", w.token_start, " is outside kv ", kv.shape.ToString());
    if (begin < w.first_new) {  // the earliest slot is the one furthest back
      if (!state_checked) CheckState(state, sh, "V4Compress");
      state_checked = true;
      CheckStatePosition(w, begin, state, sh);
    }
  }
  DeviceMeta dev = ctx.Upload(windows);
  const CompressArgs a{kv.ptr<float>(),
                       gate.ptr<float>(),
                       ape.ptr<float>(),
                       state.ptr<float>(),
                       dev.ptr<ClosedWindow>(),
                       static_cast<int>(r),
                       static_cast<int>(d),
                       static_cast<int>(width),
                       static_cast<int>(sh.state_positions()),
                       sh.overlap,
                       pooled.ptr<float>()};
  CompressKernel<<<static_cast<unsigned>(windows.size()), kCompressThreads, 0, ctx.stream()>>>(a);
  FISSION_LAUNCHED();
}

void V4UpdateCompressorState(CudaContext& ctx, const Tensor& kv, const Tensor& gate, const Tensor& state,
                             std::span<const std::int64_t> slots, const CompressorShape& sh) {
  CheckProjections(kv, gate, sh, "V4UpdateCompressorState");
  CheckState(state, sh, "V4UpdateCompressorState");
  FISSION_CHECK(static_cast<std::int64_t>(slots.size()) <= kv.shape[0], "V4UpdateCompressorState: ", slots.size(),
                " slots for ", kv.shape[0], " rows");
  for (std::int64_t entry : slots)
    FISSION_CHECK(entry < state.shape[0], "V4UpdateCompressorState: state entry ", entry, " outside the state of ",
                  state.shape[0], " entries");
  if (slots.empty()) return;
  DeviceMeta dev = ctx.Upload(slots);
  UpdateStateKernel<<<static_cast<unsigned>(slots.size()), kCopyThreads, 0, ctx.stream()>>>(
      kv.ptr<float>(), gate.ptr<float>(), dev.ptr<std::int64_t>(), static_cast<int>(sh.width()), state.ptr<float>());
  FISSION_LAUNCHED();
}

void V4Attention(CudaContext& ctx, const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                 const Tensor& selection, const Tensor& sinks, const V4Queries& queries,
                 const V4AttentionShape& sh, const Tensor& out) {
  const std::int64_t heads = sh.heads, d = sh.head_dim;
  FISSION_CHECK(heads > 0 && d > 0 && d % 4 == 0 && d <= kMaxHeadDim, "V4Attention: head_dim ", d,
                " (a multiple of 4 up to ", kMaxHeadDim, ") and ", heads, " heads");
  FISSION_CHECK(q.rank() == 3 && q.shape[1] == heads && q.shape[2] == d && q.dtype == DType::kF32, "V4Attention: q ",
                q.shape.ToString(), " ", DTypeName(q.dtype), " must be fp32 [n, ", heads, ", ", d, "]");
  FISSION_CHECK(out.shape == q.shape && out.dtype == DType::kF32, "V4Attention: out ", out.shape.ToString(),
                " must be fp32 like q ", q.shape.ToString());
  FISSION_CHECK(kv.rank() == 2 && kv.shape[1] == d && kv.dtype == DType::kF32, "V4Attention: the step's keys ",
                kv.shape.ToString(), " ", DTypeName(kv.dtype), " must be fp32 [tokens, ", d, "]");
  FISSION_CHECK(sinks.numel() == heads && sinks.dtype == DType::kF32, "V4Attention: sinks ", sinks.shape.ToString(),
                " must be fp32 [", heads, "]");
  FISSION_CHECK(sh.window > 0 && sh.ratio >= 0 && (sh.ratio == 0 || sh.page_size > 0), "V4Attention: window ",
                sh.window, ", ratio ", sh.ratio, ", page size ", sh.page_size);
  const std::int64_t n = q.shape[0];
  AttentionArgs a{};
  if (window_kv.data != nullptr) a.ring = V4StoredRowsOf(window_kv, d, sh.rope_dim, sh.kv_format, "window ring");
  if (sh.ratio > 0) a.entries = V4StoredRowsOf(entries, d, sh.rope_dim, sh.kv_format, "entries cache");
  const bool selected = sh.ratio > 0 && selection.data != nullptr;  // a sliding layer has no entries to select
  if (selected)
    FISSION_CHECK(selection.dtype == DType::kI32 && selection.rank() == 2 && selection.shape[0] == n,
                  "V4Attention: selection ", selection.shape.ToString(), " ", DTypeName(selection.dtype),
                  " must be I32 [", n, ", k]");
  const std::int64_t sel_width = selected ? selection.shape[1] : 0;
  // A rule on shapes and storage only: an eager step and its replay take the same kernel.
  const bool flash = V4FlashTakes(d, sh.rope_dim, window_kv.data != nullptr ? &a.ring : nullptr,
                                  sh.ratio > 0 ? &a.entries : nullptr);
  const std::int64_t min_keys = flash ? kV4FlashMinKeysPerSplit : kMinKeysPerSplit;
  const std::int64_t max_keys = CheckQueries(queries, n, kv, window_kv, entries, selected, sel_width, sh, min_keys);
  if (queries.rows.empty()) return;

  int chunks = 1;
  const AttentionKernelFn kernel = PickAttentionKernel(d, &chunks);
  const std::int64_t head_block = flash ? kV4FlashHeads : kHeadsPerBlock;
  const std::int64_t groups = (heads + head_block - 1) / head_block;
  const std::size_t smem = sizeof(float) * kTile * 32 * chunks;
  const int per_sm = flash ? 1 : BlocksPerSm(kernel, smem);
  const auto rows = static_cast<std::int64_t>(queries.rows.size());
  const std::int64_t max_splits = std::clamp<std::int64_t>((max_keys + min_keys - 1) / min_keys, 1, mla::kMaxSplits);
  const int splits = PickSplits(rows * groups, max_splits, static_cast<std::int64_t>(ctx.sm_count()) * per_sm);
  const std::int64_t blocks = rows * groups * splits;
  FISSION_CHECK(blocks < (std::int64_t{1} << 31), "V4Attention: too many blocks (", blocks, ")");

  DeviceMeta rows_dev = ctx.Upload(queries.rows);
  const std::int32_t no_table = 0;  // a sliding layer reads no table
  DeviceMeta tables_dev = queries.tables.empty() ? ctx.UploadConstant(std::span<const std::int32_t>(&no_table, 1))
                                                 : ctx.Upload(queries.tables);
  a.q = q.ptr<float>();
  a.kv = kv.ptr<float>();
  Buffer kv16;  // the tensor cores read the step's keys as bf16, as the ring will hold them
  if (flash) {
    kv16 = Buffer(DType::kBF16, kv.shape, ctx.allocator());
    Convert(ctx, kv, kv16);
    a.kv16 = kv16.ptr<__nv_bfloat16>();
  }
  a.selection = selected ? selection.ptr<std::int32_t>() : nullptr;
  a.sel_width = static_cast<int>(sel_width);
  a.sinks = sinks.ptr<float>();
  a.rows = rows_dev.ptr<V4QueryRow>();
  a.tables = tables_dev.ptr<std::int32_t>();
  a.table_width = static_cast<int>(queries.table_width);
  a.heads = static_cast<int>(heads);
  a.head_dim = static_cast<int>(d);
  a.window = static_cast<int>(sh.window);
  a.ratio = static_cast<int>(sh.ratio);
  a.page_size = static_cast<int>(std::max<std::int64_t>(sh.page_size, 1));
  a.per_page = static_cast<int>(sh.ratio > 0 ? std::max<std::int64_t>(1, sh.page_size / sh.ratio) : 1);
  a.head_groups = static_cast<int>(groups);
  a.splits = splits;
  a.scale_log2 = sh.softmax_scale * kLog2e;
  a.out = out.ptr<float>();
  a.total_rows = n * heads;
  Buffer part_o, part_lse;
  DeviceMeta merge_rows;
  if (splits > 1) {
    part_o = Buffer(DType::kF32, Shape{splits, n * heads, d}, ctx.allocator());
    part_lse = Buffer(DType::kF32, Shape{splits, n * heads}, ctx.allocator());
    a.part_o = part_o.ptr<float>();
    a.part_lse = part_lse.ptr<float>();
    std::vector<std::int64_t> merged;  // the (row, head) rows of out the merge writes
    merged.reserve(static_cast<std::size_t>(rows * heads));
    for (const V4QueryRow& r : queries.rows)
      for (std::int64_t h = 0; h < heads; ++h) merged.push_back(r.row * heads + h);
    // A uniform step's rows are 0 .. rows - 1 in order, whatever the step: the list is a constant
    // a replay copies again.
    merge_rows = queries.uniform ? ctx.UploadConstant(std::span<const std::int64_t>(merged))
                                 : ctx.Upload(std::span<const std::int64_t>(merged));
  }
  if (flash) {
    LaunchV4Flash(ctx.stream(), a, blocks, ctx.device());
  } else {
    kernel<<<static_cast<unsigned>(blocks), kThreads, smem, ctx.stream()>>>(a);
    FISSION_LAUNCHED();
  }
  if (splits > 1) {
    mla::MergeKernel<<<static_cast<unsigned>(rows * heads), 256, 0, ctx.stream()>>>(
        part_o.ptr<float>(), part_lse.ptr<float>(), splits, n * heads, static_cast<int>(d),
        merge_rows.ptr<std::int64_t>(), out.data, Elem::kF32);
    FISSION_LAUNCHED();
  }
}

}  // namespace fission::kernels::cuda
