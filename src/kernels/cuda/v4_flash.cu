// DeepSeek-V4's attention on the tensor cores (kernels/v4_ops.h V4Attention; v4_attention.cu holds
// the fp32 kernel for the exact path and the host side both kernels share): bf16 products with fp32
// accumulation, for head_dim 512 and a ring and entries stored as bf16 or FP8 (v4_storage.cuh). The
// one KV head is key and value, so a gathered key row is also the value row: MQA over the window
// and the compressed entries, the per-head sink in the softmax denominator.
//
// One block of 8 warps per (query row, group of 64 heads, split of the row's key list), on the tile
// core of sparse_flash.cuh (heads past the last are zero rows, not written). The row's 64 q rows
// (fp32, converted once) stay in shared memory; the keys are gathered in tiles of 64 into two
// stages: the step's own keys (a bf16 copy made by the host side, as the ring holds them) and bf16
// ring or entry rows by cp.async, FP8 entries decoded to bf16 through registers. The next tile's
// keys are resolved a tile ahead and its entry numbers two ahead, so the selection's and the block
// table's latency hides behind a tile's products. The sink is a key without a value: split 0
// starts its rows with maximum = sink (base 2) and sum 1 (in one lane of the rows' quad and pair). Splits write
// their log-sum-exp for mla::MergeKernel, as the fp32 kernel's do.
//
// Shared memory: q 64 KB, two key stages of 64 KB, P 8 KB: 205,440 bytes, one block a multiprocessor.
#include <cuda_bf16.h>

#include <atomic>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/mla_latent.cuh"
#include "kernels/cuda/sparse_flash.cuh"
#include "kernels/cuda/v4_attention.cuh"

namespace fission::kernels::cuda {
namespace {

using sparse_flash::kKeys, sparse_flash::kRows, sparse_flash::kThreads;
constexpr int kDim = 512, kChunks = kDim / 8;  // 16-byte chunks of a row
constexpr int kTileBytes = kKeys * kDim * 2;
constexpr int kOffK = kRows * kDim * 2, kOffP = kOffK + 2 * kTileBytes, kOffRed = kOffP + sparse_flash::kPBytes;
constexpr int kOffValid = kOffRed + sparse_flash::kRedBytes;
constexpr int kSmemBytes = kOffValid + 2 * kKeys;  // 205440
static_assert(kRows == kV4FlashHeads && kKeys == kV4FlashMinKeysPerSplit);

__device__ __forceinline__ int Swz(int row, int chunk) { return sparse_flash::Swz<kChunks>(row, chunk); }

// The 64 heads' q rows from head0 as bf16: thread (row tid / 4) converts chunks tid % 4 + 4i,
// four chunks' loads in flight at a time.
__device__ __forceinline__ void LoadQ(unsigned char* qs, const V4AttentionArgs& a, std::int64_t row, int head0) {
  const int r = threadIdx.x >> 2, q = threadIdx.x & 3, head = head0 + r;
  const bool ok = head < a.heads;
  const float* src = a.q + (row * a.heads + (ok ? head : 0)) * kDim;
#pragma unroll
  for (int i0 = 0; i0 < kChunks / 4; i0 += 4) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      v[u] = ok ? mla::Load8(src, 8 * (q + 4 * (i0 + u)), Elem::kF32) : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int u = 0; u < 4; ++u) *reinterpret_cast<uint4*>(qs + 16 * Swz(r, q + 4 * (i0 + u))) = v[u];
  }
}

// Eight values [8c, 8c + 8) of a packed FP8 entry as bf16: e4m3 codes times their block's power
// of two (exact in bf16), or bf16 rope values. The entry's fields are unaligned: read by byte.
__device__ __forceinline__ uint4 Fp8EntryChunk(const V4StoredRows& rows, std::int64_t slot, int c) {
  const auto* entry = static_cast<const std::uint8_t*>(rows.data) + slot * rows.stride;
  std::uint32_t w[4];
  if (8 * c < rows.nope) {
    const float scale = DecodeUe8m0(entry[rows.nope + 8 * c / static_cast<int>(kV4Fp8Block)]);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = mla::Pack(__float2bfloat16_rn(DecodeE4m3(entry[8 * c + 2 * i]) * scale),
                       __float2bfloat16_rn(DecodeE4m3(entry[8 * c + 2 * i + 1]) * scale));
  } else {
    const std::uint8_t* b = entry + rows.nope + rows.scales + 2 * (8 * c - rows.nope);  // little-endian
#pragma unroll
    for (int i = 0; i < 4; ++i)
      w[i] = static_cast<std::uint32_t>(b[4 * i]) | (static_cast<std::uint32_t>(b[4 * i + 1]) << 8) |
             (static_cast<std::uint32_t>(b[4 * i + 2]) << 16) | (static_cast<std::uint32_t>(b[4 * i + 3]) << 24);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Key row tid / 4 of a tile (chunks as in LoadQ), zeros for kNoKey.
__device__ __forceinline__ void LoadKey(unsigned char* ks, const V4AttentionArgs& a, std::int8_t kind,
                                        std::int64_t slot) {
  const int r = threadIdx.x >> 2, q = threadIdx.x & 3;
  const V4StoredRows& rows = kind == kRingKey ? a.ring : a.entries;
  if ((kind == kRingKey || kind == kEntryKey) && rows.fp8) {
#pragma unroll 4
    for (int i = 0; i < kChunks / 4; ++i) {
      const int c = q + 4 * i;
      *reinterpret_cast<uint4*>(ks + 16 * Swz(r, c)) = Fp8EntryChunk(rows, slot, c);
    }
    return;
  }
  const __nv_bfloat16* src = a.kv16;  // kStepKey, and a valid address for kNoKey's zero fill
  if (kind == kStepKey) src += slot * kDim;
  if (kind == kRingKey || kind == kEntryKey) src = static_cast<const __nv_bfloat16*>(rows.data) + slot * rows.stride;
#pragma unroll
  for (int i = 0; i < kChunks / 4; ++i) {
    const int c = q + 4 * i;
    mla::CpAsync16(ks + 16 * Swz(r, c), src + 8 * c, kind == kNoKey ? 0 : 16);
  }
}

__global__ void __launch_bounds__(kThreads, 1) V4FlashKernel(const V4AttentionArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* qs = smem;
  unsigned char* ps = smem + kOffP;
  float* red = reinterpret_cast<float*>(smem + kOffRed);
  unsigned char* valid = smem + kOffValid;
  __shared__ int sel_count;

  const int hg = blockIdx.x % a.head_groups, rest = blockIdx.x / a.head_groups;
  const int split = rest % a.splits;
  const V4QueryRow r = a.rows[rest / a.splits];
  const V4RowKeys keys = KeysOfRow(a, r, &sel_count);
  const int chunk = max(kKeys, ((keys.total + a.splits - 1) / a.splits + kKeys - 1) / kKeys * kKeys);
  const int kb = split * chunk, ke = min(keys.total, kb + chunk);
  const int head0 = hg * kRows, tid = threadIdx.x;
  if (kb >= ke) {  // an empty split adds nothing: lse -inf, which the merge skips
    if (tid < kRows && head0 + tid < a.heads)
      a.part_lse[split * a.total_rows + static_cast<std::int64_t>(r.row) * a.heads + head0 + tid] = -INFINITY;
    return;
  }
  const sparse_flash::Lane ln = sparse_flash::LaneOf(tid);
  const int lr = tid >> 2;  // this thread's key row of every tile

  // Key lr of the tile from k0: its kind and slot (kNoKey past the split).
  auto resolve = [&](int k0, int entry, std::int8_t* kind, std::int64_t* slot) {
    *kind = kNoKey;
    *slot = 0;
    if (k0 + lr < ke) ResolveKey(a, r, keys, k0 + lr, entry, kind, slot);
  };
  auto entry_of = [&](int k0) { return k0 + lr < ke ? EntryOfKey(keys, k0 + lr) : -1; };

  LoadQ(qs, a, r.row, head0);
  std::int8_t kind;
  std::int64_t slot;
  resolve(kb, entry_of(kb), &kind, &slot);
  LoadKey(smem + kOffK, a, kind, slot);
  if ((tid & 3) == 0) valid[lr] = kind != kNoKey;
  mla::CpAsyncCommit();
  const int tiles = (ke - kb + kKeys - 1) / kKeys;
  resolve(kb + kKeys, entry_of(kb + kKeys), &kind, &slot);

  sparse_flash::RowState st;
  sparse_flash::Reset(st);
  if (split == 0) {  // the sink, once per row
    const int h0 = head0 + ln.prow0, h1 = head0 + ln.prow1;
    if (h0 < a.heads) st.m0 = a.sinks[h0] * sparse_flash::kLog2e;
    if (h1 < a.heads) st.m1 = a.sinks[h1] * sparse_flash::kLog2e;
    if (ln.cg == 0 && ln.t4 == 0) {  // the sums add over the quad's lanes and the pair's warps
      st.l0 = h0 < a.heads ? 1.0f : 0.0f;
      st.l1 = h1 < a.heads ? 1.0f : 0.0f;
    }
  }
  for (int it = 0; it < tiles; ++it) {
    mla::CpAsyncWait<0>();
    __syncthreads();  // the tile has landed for every thread, and the other stage was read last time
    const int stage = it & 1;
    if (it + 1 < tiles) {
      LoadKey(smem + kOffK + (stage ^ 1) * kTileBytes, a, kind, slot);
      if ((tid & 3) == 0) valid[(stage ^ 1) * kKeys + lr] = kind != kNoKey;
    }
    mla::CpAsyncCommit();
    const int after = kb + (it + 2) * kKeys;  // the tile after next: its entry now, its slot after S
    const int entry_after = entry_of(after);
    const unsigned char* ks = smem + kOffK + stage * kTileBytes;
    float s[4][4];
    sparse_flash::Scores<kChunks>(qs, ks, ln, s);
    resolve(after, entry_after, &kind, &slot);
    std::uint32_t pf[2][4];
    sparse_flash::SoftmaxTile(s, valid + stage * kKeys, a.scale_log2, red, ps, ln, st, pf);
    sparse_flash::AccumulateValues<kChunks>(pf, ps, ks, ln, st);
  }
  float total0, total1;
  sparse_flash::RowTotals(st, red, ln, &total0, &total1);
  sparse_flash::RowSink sink;
  sink.row0 = static_cast<std::int64_t>(r.row) * a.heads + head0;
  sink.rows = min(kRows, a.heads - head0);
  sink.split = split;
  sink.splits = a.splits;
  sink.total_rows = a.total_rows;
  sink.part_o = a.part_o;
  sink.part_lse = a.part_lse;
  sparse_flash::StoreRows(st, total0, total1, ln, sink, a.out);
}

bool StoredForTensorCores(const V4StoredRows* rows) {
  return rows == nullptr || rows->fp8 || rows->elem == Elem::kBF16;
}

}  // namespace

bool V4FlashTakes(std::int64_t head_dim, std::int64_t rope_dim, const V4StoredRows* ring, const V4StoredRows* entries) {
  return head_dim == kDim && rope_dim % 8 == 0 && rope_dim < kDim && (ring != nullptr || entries != nullptr) &&
         StoredForTensorCores(ring) && StoredForTensorCores(entries);
}

void LaunchV4Flash(cudaStream_t stream, const V4AttentionArgs& a, std::int64_t blocks, int device) {
  static std::atomic<std::uint64_t> configured{0};  // the attribute is per device
  const std::uint64_t bit = std::uint64_t{1} << (device & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(V4FlashKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  V4FlashKernel<<<static_cast<unsigned>(blocks), kThreads, kSmemBytes, stream>>>(a);
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
