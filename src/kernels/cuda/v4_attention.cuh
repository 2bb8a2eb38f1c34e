// What DeepSeek-V4's two attention kernels share (v4_attention.cu: fp32 on CUDA cores, any
// head_dim; v4_flash.cu: bf16 tensor cores at head_dim 512): their arguments, and how a query
// row's key list is laid out and resolved on the device.
//
// A row at position p sees its window positions (p - window, p] (nw keys from lo), then its
// entries: every visible one (HCA: e < (p + 1) / ratio) or the indexer's selection up to its
// first -1 (CSA). A window position of the step is a row of the step's keys, an earlier one a slot
// of the sequence's ring; an entry lives in the page of its first position.
#pragma once

#include <cuda_bf16.h>

#include "kernels/cuda/v4_storage.cuh"
#include "kernels/v4_ops.h"

namespace fission::kernels::cuda {

struct V4AttentionArgs {
  const float* q;              // [n, heads, head_dim]
  const float* kv;             // the step's keys [tokens, head_dim], fp32 (v4_attention.cu)
  const __nv_bfloat16* kv16;   // the same keys as bf16 (v4_flash.cu)
  V4StoredRows ring, entries;
  const std::int32_t* selection;  // null: every visible entry
  int sel_width;
  const float* sinks;
  const V4QueryRow* rows;
  const std::int32_t* tables;  // [sequences, table_width]
  int table_width;
  int heads, head_dim, window, ratio, page_size, per_page;
  int head_groups, splits;
  float scale_log2;
  float* out;
  float* part_o;  // splits > 1: [splits, rows · heads, head_dim] and [splits, rows · heads]
  float* part_lse;
  std::int64_t total_rows;
};

// Where a key comes from.
enum V4KeyKind : std::int8_t { kNoKey = 0, kStepKey, kRingKey, kEntryKey };

// A row's key list: nw window positions from lo, then its entries; `total` keys in all.
struct V4RowKeys {
  const std::int32_t* sel;  // the row's selection, or null (every visible entry)
  int lo, nw, visible, total;
};

// Called by every thread of the block (two barriers); `sel_count` is a shared int.
__device__ __forceinline__ V4RowKeys KeysOfRow(const V4AttentionArgs& a, const V4QueryRow& r, int* sel_count) {
  V4RowKeys k;
  const int p = r.position;
  k.lo = max(0, p - a.window + 1);
  k.nw = p - k.lo + 1;
  k.visible = a.ratio > 0 ? (p + 1) / a.ratio : 0;
  k.sel = a.selection != nullptr ? a.selection + static_cast<std::int64_t>(r.row) * a.sel_width : nullptr;
  if (threadIdx.x == 0) *sel_count = a.sel_width;
  __syncthreads();
  if (k.sel != nullptr)
    for (int j = threadIdx.x; j < a.sel_width; j += blockDim.x)
      if (k.sel[j] < 0) {  // the selection ends at its first -1
        atomicMin(sel_count, j);
        break;
      }
  __syncthreads();
  k.total = k.nw + (k.sel != nullptr ? *sel_count : k.visible);
  return k;
}

// The entry number of key i (a list item), or -1 for a window key. Read a step ahead of its slot
// by the tensor-core kernel, so the selection's latency hides behind a tile's products.
__device__ __forceinline__ int EntryOfKey(const V4RowKeys& k, int i) {
  if (i < k.nw) return -1;
  return k.sel != nullptr ? k.sel[i - k.nw] : i - k.nw;
}

// Key i of the row (entry number e from EntryOfKey): its kind and slot.
__device__ __forceinline__ void ResolveKey(const V4AttentionArgs& a, const V4QueryRow& r, const V4RowKeys& k, int i,
                                           int e, std::int8_t* kind, std::int64_t* slot) {
  *kind = kNoKey;
  *slot = 0;
  if (i < k.nw) {
    const int pos = k.lo + i;
    if (pos >= r.first_new) {
      *kind = kStepKey;
      *slot = r.token_start + (pos - r.first_new);
    } else {
      *kind = kRingKey;
      *slot = r.ring_base + pos % a.window;
    }
    return;
  }
  if (e < 0 || e >= k.visible) return;  // never read outside the row's table
  const int first = e * a.ratio;        // EntrySlot: the entry lives in the page of its first position
  const std::int32_t* table = a.tables + static_cast<std::int64_t>(r.table) * a.table_width;
  *kind = kEntryKey;
  *slot = static_cast<std::int64_t>(table[first / a.page_size]) * a.per_page + (first % a.page_size) / a.ratio;
}

// v4_flash.cu: whether the tensor-core kernel takes this layer (head_dim 512, rope a multiple of
// 8, ring and entries stored as bf16 or FP8: the fp32-exact path keeps the fp32 kernel), its
// shortest split, and its launch (blocks = rows · head_groups · splits; a.kv16 set).
constexpr int kV4FlashHeads = 64, kV4FlashMinKeysPerSplit = 64;
bool V4FlashTakes(std::int64_t head_dim, std::int64_t rope_dim, const V4StoredRows* ring, const V4StoredRows* entries);
void LaunchV4Flash(cudaStream_t stream, const V4AttentionArgs& a, std::int64_t blocks, int device);

}  // namespace fission::kernels::cuda
