// Host side of MLA attention: builds the per-sequence metadata and work list (for a pure decode
// step, a kernel builds it on the device from the uploaded positions, so the step can be captured),
// prepares the operands of each form, launches mla::FlashKernel and, for split keys,
// mla::MergeKernel.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mla_flash.cuh"
#include "kernels/cuda/mla_host.h"
#include "kernels/cuda/mla_latent.cuh"
#include "kernels/cuda/mla_prefill.cuh"

namespace fission::kernels::cuda {
namespace {

using mla::Params;
using mla::RowSrc;
using mla::SeqInfo;
using mla::WorkItem;

constexpr float kLog2e = 1.4426950408889634f;

void CheckShapes(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                 const MlaShape& sh, const Tensor& out) {
  const std::int64_t heads = sh.num_heads, qk = sh.qk_nope_head_dim + sh.qk_rope_head_dim;
  FISSION_CHECK(cache.rank() == 2 && cache.shape[1] == LatentRowWidth(sh) &&
                    (sh.latent_format == LatentFormat::kExact || cache.dtype == DType::kU8),
                "latent cache ", cache.shape.ToString(), " ", DTypeName(cache.dtype), " for rows of ", LatentRowWidth(sh));
  FISSION_CHECK(q.numel() % (heads * qk) == 0 && kv_b.shape[0] == heads * (sh.qk_nope_head_dim + sh.v_head_dim) &&
                kv_b.shape[1] == sh.kv_lora_rank, "MLA q", q.shape.ToString(), " kv_b", kv_b.shape.ToString());
  const std::int64_t n = q.numel() / (heads * qk);
  FISSION_CHECK(out.numel() == n * heads * sh.v_head_dim, "MLA out ", out.shape.ToString());
  CheckSeqAttention(seqs, n, cache, sh.page_size);
}

template <int DQK, int DV, bool kVFromK, int RB>
void Launch(CudaContext& ctx, const Params& p, int items, int grid_y) {
  using L = mla::Smem<DQK, DV, kVFromK, RB>;
  // A function attribute is per device: one call per instantiation and device (ranks of one
  // process run on several devices, from several threads).
  static std::atomic<std::uint64_t> configured{0};
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(mla::FlashKernel<DQK, DV, kVFromK, RB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(L::kBytes)));
  mla::FlashKernel<DQK, DV, kVFromK, RB>
      <<<dim3(static_cast<unsigned>(items), static_cast<unsigned>(grid_y)), mla::kThreads, L::kBytes, ctx.stream()>>>(p);
  FISSION_LAUNCHED();
}

// Keys of a split: at least this many (fewer make the merge cost more than the split saves).
constexpr int kMinKeysPerSplit = 256;
// A pure decode step's splits may be as short as one tile: with 128 heads the absorbed form does
// about 240 FLOP per cache byte, so a short context is compute-bound and is best spread over
// many multiprocessors (the profile of 2026-11-30 at 4 layers: 256-key splits left 10 of 132
// busy for a 1100-token context); the merge reads only the splits that saw keys.
constexpr int kMinDecodeKeysPerSplit = mla::kKeys;
// Splits of a pure decode step, chosen without its context lengths: at most this many. The fill
// rule alone gives a single 16-row block (batch 1, 16 heads) 119 splits on H200's 132
// multiprocessors, so a long context spreads over the chip as the host rule spreads it; the cap
// bounds the partial results on larger chips. A short context's unused splits are blocks that
// return at once.
constexpr std::int64_t kMaxDecodeSplits = std::min<std::int64_t>(128, mla::kMaxSplits);

// A uniform step's work list (PlanDecodeOnDevice): item (sequence i, row block rb, split sp) at
// (i·row_blocks + rb)·splits + sp, the order the host lists use. Sequence i has `tokens` queries at
// rows [i·tokens, (i + 1)·tokens) and its keys are [0, last query's position + 1), cut into chunks
// of ⌈kv_len / splits⌉ keys rounded up to whole tiles, so a short context leaves its later splits
// empty (each query row still sees keys up to its own position). A position outside the block
// table's reach is clamped: whatever the values, nothing outside the table is read.
__global__ void DecodeWorkKernel(const std::int32_t* positions, int n, int tokens, int table_width, int page_size,
                                 int row_blocks, int rows_per_block, int splits, SeqInfo* seqs, WorkItem* items) {
  const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const int per_seq = row_blocks * splits;
  if (item >= static_cast<std::int64_t>(n) * per_seq) return;
  const int i = static_cast<int>(item / per_seq), in_seq = static_cast<int>(item % per_seq);
  const int rb = in_seq / splits, sp = in_seq % splits;
  const int reach = table_width * page_size, position = positions[i * tokens + tokens - 1];
  const int kv_len = position < 0 ? 1 : min(position, reach - 1) + 1;
  const int chunk =
      max(kMinDecodeKeysPerSplit, ((kv_len + splits - 1) / splits + mla::kKeys - 1) / mla::kKeys * mla::kKeys);
  items[item] = WorkItem{i, rb * rows_per_block, min(kv_len, sp * chunk), min(kv_len, (sp + 1) * chunk), sp};
  if (in_seq == 0) seqs[i] = SeqInfo{i * tokens, tokens, kv_len, 0, i * table_width, i * tokens};
}

// The absorbed form's work on the device: sequences, work items (blocks of the flash kernel), block
// tables, query positions, and the merge_count rows the split merge writes (merge_rows, or rows
// 0 .. merge_count - 1 when it holds none).
struct AbsorbedWork {
  DeviceMeta seqs, items, tables, positions, merge_rows;
  int item_count = 0, splits = 1;
  std::int64_t merge_count = 0;
};

// Any batch: lists built on the host, the splits from the longest context.
AbsorbedWork PlanOnHost(CudaContext& ctx, std::span<const SeqAttention> seqs, std::int64_t heads, int rows_per_block) {
  std::vector<SeqInfo> infos;
  std::vector<std::int32_t> tables, positions;
  std::int64_t base_blocks = 0, max_kv = 0;
  for (const SeqAttention& s : seqs) {
    infos.push_back({s.query_start, s.query_len, s.kv_len, 0, static_cast<int>(tables.size()),
                     static_cast<int>(positions.size())});
    tables.insert(tables.end(), s.block_table.begin(), s.block_table.end());
    positions.insert(positions.end(), s.query_positions.begin(), s.query_positions.end());
    base_blocks += (s.query_len * heads + rows_per_block - 1) / rows_per_block;
    max_kv = std::max<std::int64_t>(max_kv, s.kv_len);
  }
  AbsorbedWork work;
  work.splits = PickSplits(
      base_blocks, std::clamp<std::int64_t>((max_kv + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, mla::kMaxSplits),
      ctx.sm_count());
  const int splits = work.splits;
  std::vector<WorkItem> items;
  std::vector<std::int64_t> rows;  // flattened (token, head) rows that the merge writes
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const SeqAttention& s = seqs[i];
    const int kv_len = s.kv_len;
    const int chunk = ((kv_len + splits - 1) / splits + mla::kKeys - 1) / mla::kKeys * mla::kKeys;
    for (int r = 0; r < s.query_len * heads; r += rows_per_block)
      for (int sp = 0; sp < splits; ++sp)
        items.push_back({static_cast<int>(i), r, std::min(kv_len, sp * chunk), std::min(kv_len, (sp + 1) * chunk), sp});
    if (splits > 1)
      for (std::int64_t r = 0; r < s.query_len * heads; ++r) rows.push_back(s.query_start * heads + r);
  }
  work.item_count = static_cast<int>(items.size());
  work.seqs = ctx.Upload(std::span<const SeqInfo>(infos));
  work.items = ctx.Upload(std::span<const WorkItem>(items));
  work.tables = ctx.Upload(std::span<const std::int32_t>(tables));
  work.positions = ctx.Upload(std::span<const std::int32_t>(positions));
  if (splits > 1) work.merge_rows = ctx.Upload(std::span<const std::int64_t>(rows));
  work.merge_count = static_cast<std::int64_t>(rows.size());
  return work;
}

// A uniform step (pure decode, or verify runs of `tokens` queries each): the splits follow from the
// batch size, tokens and heads alone, and a kernel reads each sequence's last position (kv_len =
// position + 1) on the device to cut its keys. Nothing here depends on this step's values, so a
// captured step replays with new positions and tables.
AbsorbedWork PlanDecodeOnDevice(CudaContext& ctx, std::span<const SeqAttention> seqs, std::int64_t tokens,
                                std::int64_t heads, std::int64_t page_size, int rows_per_block) {
  AbsorbedWork work;
  std::int64_t position_width = 0, table_width = 0;
  work.positions = UploadPerSequence(ctx, seqs, [](const SeqAttention& s) { return s.query_positions; },
                                     &position_width);
  work.tables = UploadPerSequence(ctx, seqs, [](const SeqAttention& s) { return s.block_table; }, &table_width);
  FISSION_CHECK(position_width == tokens, "a uniform step's sequence has ", tokens, " query positions");
  const std::int64_t n = static_cast<std::int64_t>(seqs.size());
  const int row_blocks = static_cast<int>((tokens * heads + rows_per_block - 1) / rows_per_block);
  work.splits = PickSplits(n * row_blocks, kMaxDecodeSplits, ctx.sm_count());
  const std::int64_t items = n * row_blocks * work.splits;
  FISSION_CHECK(items < (std::int64_t{1} << 31) && n * table_width < (std::int64_t{1} << 31),
                "decode work list too large: ", n, " sequences");
  work.item_count = static_cast<int>(items);
  work.merge_count = n * tokens * heads;
  work.seqs = DeviceMeta(Buffer(DType::kU8, Shape{n * static_cast<std::int64_t>(sizeof(SeqInfo))}, ctx.allocator()));
  work.items = DeviceMeta(Buffer(DType::kU8, Shape{items * static_cast<std::int64_t>(sizeof(WorkItem))}, ctx.allocator()));
  DecodeWorkKernel<<<Blocks(items, 256), 256, 0, ctx.stream()>>>(
      work.positions.ptr<std::int32_t>(), static_cast<int>(n), static_cast<int>(tokens), static_cast<int>(table_width),
      static_cast<int>(page_size), row_blocks, rows_per_block, work.splits, work.seqs.ptr<SeqInfo>(),
      work.items.ptr<WorkItem>());
  FISSION_LAUNCHED();
  return work;
}

// The expanded form's work: the cache slot of every key of every sequence (gathered into one
// block), the sequences, their query positions and the work items (blocks of the prefill kernel).
struct ExpandedWork {
  DeviceMeta slots, seqs, items, positions;
  std::int64_t total_kv = 0;
  int item_count = 0;
};

ExpandedWork PlanExpanded(CudaContext& ctx, std::span<const SeqAttention> seqs, std::int64_t page_size,
                          int rows_per_block, std::int64_t cache_rows) {
  std::vector<SeqInfo> infos;
  std::vector<std::int32_t> slots, positions;
  std::vector<WorkItem> items;
  FISSION_CHECK(cache_rows < (std::int64_t{1} << 31), "cache too large for 32-bit slots");
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const SeqAttention& s = seqs[i];
    const int kv_len = s.kv_len;
    infos.push_back({s.query_start, s.query_len, kv_len, static_cast<int>(slots.size()), 0,
                     static_cast<int>(positions.size())});
    positions.insert(positions.end(), s.query_positions.begin(), s.query_positions.end());
    for (int p = 0; p < kv_len; ++p)
      slots.push_back(static_cast<std::int32_t>(s.block_table[p / page_size] * page_size + p % page_size));
    for (int r = 0; r < s.query_len; r += rows_per_block) items.push_back({static_cast<int>(i), r, 0, kv_len, 0});
  }
  // Most keys first (by the block's last row), so the longest blocks start early.
  auto reach = [&](const WorkItem& w) {
    const SeqAttention& s = seqs[w.seq];
    return s.query_positions[std::min(w.row_begin + rows_per_block, s.query_len) - 1];
  };
  std::stable_sort(items.begin(), items.end(), [&](const WorkItem& a, const WorkItem& b) { return reach(a) > reach(b); });
  ExpandedWork work;
  work.total_kv = static_cast<std::int64_t>(slots.size());
  work.item_count = static_cast<int>(items.size());
  if (items.empty()) return work;
  work.slots = ctx.Upload(std::span<const std::int32_t>(slots));
  work.seqs = ctx.Upload(std::span<const SeqInfo>(infos));
  work.items = ctx.Upload(std::span<const WorkItem>(items));
  work.positions = ctx.Upload(std::span<const std::int32_t>(positions));
  return work;
}

}  // namespace

namespace mla {
__global__ void MergeKernel(const float* part_o, const float* part_lse, int num_splits, std::int64_t total_rows,
                            int dv, const std::int64_t* rows, void* out, Elem oe) {
  __shared__ float weight[kMaxSplits];
  __shared__ int live[kMaxSplits];  // the splits of nonzero weight, ascending
  __shared__ int live_count;
  __shared__ float reduce[32];
  const std::int64_t row = rows != nullptr ? rows[blockIdx.x] : static_cast<std::int64_t>(blockIdx.x);
  float mx = -INFINITY;
  for (int s = threadIdx.x; s < num_splits; s += blockDim.x) {
    weight[s] = part_lse[s * total_rows + row];
    mx = fmaxf(mx, weight[s]);
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) reduce[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) mx = fmaxf(mx, reduce[w]);
  __syncthreads();
  float den = 0.0f;
  for (int s = threadIdx.x; s < num_splits; s += blockDim.x) {
    const float w = weight[s] == -INFINITY ? 0.0f : exp2f(weight[s] - mx);
    weight[s] = w;
    den += w;
  }
  for (int o = 16; o > 0; o >>= 1) den += __shfl_xor_sync(0xffffffffu, den, o);
  if ((threadIdx.x & 31) == 0) reduce[threadIdx.x >> 5] = den;
  __syncthreads();
  den = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) den += reduce[w];
  const float inv = den > 0.0f ? 1.0f / den : 0.0f;
  // A decode step's split count fills the chip whatever the context, so most splits of a short
  // one saw no key: list the others once (warp 0, by ballots), and the column sums loop over them
  // alone, in the same ascending order.
  if (threadIdx.x < 32) {
    int count = 0;
    for (int s0 = 0; s0 < num_splits; s0 += 32) {
      const int s = s0 + static_cast<int>(threadIdx.x);
      const bool on = s < num_splits && weight[s] != 0.0f;
      const unsigned mask = __ballot_sync(0xffffffffu, on);
      if (on) live[count + __popc(mask & ((1u << threadIdx.x) - 1u))] = s;
      count += __popc(mask);
    }
    if (threadIdx.x == 0) live_count = count;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < dv; c += blockDim.x) {
    float num = 0.0f;
#pragma unroll 8
    for (int i = 0; i < live_count; ++i) {
      const int s = live[i];
      num += weight[s] * part_o[(s * total_rows + row) * dv + c];
    }
    StoreF(out, row * dv + c, oe, num * inv);
  }
}
}  // namespace mla

// Shared with the sparse (DSA) attention: kernels/cuda/mla_host.h.
// Rows [begin, end) of the flattened queries that belong to the given sequences, merged into runs.
std::vector<std::pair<std::int64_t, std::int64_t>> QueryRuns(std::span<const SeqAttention> seqs) {
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;
  std::vector<const SeqAttention*> sorted;
  for (const SeqAttention& s : seqs)
    if (s.query_len > 0) sorted.push_back(&s);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->query_start < b->query_start; });
  for (const SeqAttention* s : sorted) {
    if (!runs.empty() && runs.back().second == s->query_start)
      runs.back().second += s->query_len;
    else
      runs.emplace_back(s->query_start, s->query_start + s->query_len);
  }
  return runs;
}

// A bf16 copy of t, or t itself when it already is bf16.
Tensor AsBf16(CudaContext& ctx, const Tensor& t, Buffer& holder) {
  if (t.dtype == DType::kBF16) return t;
  holder = Buffer(DType::kBF16, t.shape, ctx.allocator());
  Convert(ctx, t, holder);
  return holder.tensor();
}

// The absorbed form's per-head GEMMs (strided-batched, a head per batch entry) over runs of
// consecutive query rows: q_latent[t, h] = q_nope[t, h] · W_UK[h] (W_UK[h] = kv_b rows h·(nope+v) + [0, nope)).
void AbsorbQueries(CudaContext& ctx, const __nv_bfloat16* wb, const __nv_bfloat16* qb, __nv_bfloat16* ql,
                   std::span<const std::pair<std::int64_t, std::int64_t>> runs, const MlaShape& sh) {
  const std::int64_t heads = sh.num_heads, lora = sh.kv_lora_rank, nope = sh.qk_nope_head_dim;
  const std::int64_t vdim = sh.v_head_dim, qk = nope + sh.qk_rope_head_dim;
  for (const auto& [begin, end] : runs) {
    GemmDesc g;
    g.m = lora;
    g.n = end - begin;
    g.k = nope;
    g.a = wb;
    g.a_type = CUDA_R_16BF;
    g.lda = lora;
    g.stride_a = (nope + vdim) * lora;
    g.b = qb + begin * heads * qk;
    g.b_type = CUDA_R_16BF;
    g.ldb = heads * qk;
    g.stride_b = qk;
    g.d = ql + begin * heads * lora;
    g.d_type = CUDA_R_16BF;
    g.ldd = heads * lora;
    g.stride_d = lora;
    g.batch = static_cast<int>(heads);
    FISSION_CHECK(ctx.Gemm(g), "cuBLASLt has no algorithm for the MLA query absorption");
  }
}

// out[t, h] = W_UV[h] · o_latent[t, h] (W_UV[h] = kv_b rows h·(nope+v) + nope + [0, v)).
void ProjectValues(CudaContext& ctx, const __nv_bfloat16* wb, const __nv_bfloat16* ol, const Tensor& out,
                   std::span<const std::pair<std::int64_t, std::int64_t>> runs, const MlaShape& sh) {
  const std::int64_t heads = sh.num_heads, lora = sh.kv_lora_rank, nope = sh.qk_nope_head_dim;
  const std::int64_t vdim = sh.v_head_dim;
  FISSION_CHECK(out.dtype == DType::kF32 || out.dtype == DType::kBF16, "MLA out must be fp32 or bf16");
  for (const auto& [begin, end] : runs) {
    GemmDesc g;
    g.trans_a = true;
    g.m = vdim;
    g.n = end - begin;
    g.k = lora;
    g.a = wb + nope * lora;
    g.a_type = CUDA_R_16BF;
    g.lda = lora;
    g.stride_a = (nope + vdim) * lora;
    g.b = ol + begin * heads * lora;
    g.b_type = CUDA_R_16BF;
    g.ldb = heads * lora;
    g.stride_b = lora;
    g.d = static_cast<unsigned char*>(out.data) + DTypeBytes(out.dtype, begin * heads * vdim);
    g.d_type = out.dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
    g.ldd = heads * vdim;
    g.stride_d = vdim;
    g.batch = static_cast<int>(heads);
    FISSION_CHECK(ctx.Gemm(g), "cuBLASLt has no algorithm for the MLA value projection");
  }
}

// The fewest splits (at most max_splits) that fill at least 90% of the last wave of blocks: one
// block per multiprocessor, since both decode variants use more than half of its shared memory.
int PickSplits(std::int64_t base_blocks, std::int64_t max_splits, std::int64_t slots) {
  int splits = 1;
  double best = 0.0;
  for (std::int64_t sp = 1; sp <= max_splits; ++sp) {
    const std::int64_t blocks = base_blocks * sp, waves = (blocks + slots - 1) / slots;
    const double fill = static_cast<double>(blocks) / static_cast<double>(waves * slots);
    if (fill > best + 1e-9) {
      best = fill;
      splits = static_cast<int>(sp);
    }
    if (fill >= 0.9) break;
  }
  return splits;
}

// The queries a sequence has in a uniform step of n query rows, or 0: every sequence has the same
// count T (1: a pure decode, more: verify runs) at rows [i·T, (i + 1)·T), its last query its last key.
std::int64_t UniformQueries(std::span<const SeqAttention> seqs, std::int64_t n) {
  if (seqs.empty()) return 0;
  const std::int32_t t = seqs[0].query_len;
  if (t < 1 || static_cast<std::int64_t>(seqs.size()) * t != n) return 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const SeqAttention& s = seqs[i];
    if (s.query_len != t || s.query_start != static_cast<std::int32_t>(i) * t || s.query_positions.back() != s.kv_len - 1)
      return 0;
  }
  return t;
}

// A pure decode step: sequence i has one query, at row i, and that token is its last key.
bool PureDecode(std::span<const SeqAttention> seqs, std::int64_t n) { return UniformQueries(seqs, n) == 1; }

void MlaAttentionExpanded(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  CheckShapes(q, cache, kv_b, seqs, sh, out);
  // The tuned kernel is built for DeepSeek-V3's 128/64/128 heads; other shapes take the reference.
  if (!MlaTunedShape(sh, /*absorbed=*/false)) return MlaAttentionReference(ctx, q, cache, kv_b, seqs, sh, out);
  const std::int64_t heads = sh.num_heads, lora = sh.kv_lora_rank, row_w = lora + sh.qk_rope_head_dim;
  const std::int64_t nope = sh.qk_nope_head_dim, vdim = sh.v_head_dim, qk = nope + sh.qk_rope_head_dim;
  // The register-softmax kernel (mla_prefill.cuh) by default; FISSION_MLA_PREFILL=generic selects the
  // shared-memory-softmax kernel (mla_flash.cuh), kept for comparison.
  const char* choice = std::getenv("FISSION_MLA_PREFILL");
  const bool generic = choice != nullptr && std::strcmp(choice, "generic") == 0;
  const int rows_per_block = generic ? mla::kMaxRows : mla::kPrefillRows;
  // Gather every sequence's latent rows (cached prefix and new tokens) into one contiguous bf16 block
  // (FP8 entries decoded on the way): the step's working copy that the key/value expansion reads.
  const ExpandedWork& work = ctx.StepMemo<ExpandedWork>(
      {"mla.expanded", seqs.data(), seqs.size(), rows_per_block, sh.page_size, cache.shape[0]},
      seqs.empty() ? nullptr : seqs[0].query_positions.data(),
      [&] { return PlanExpanded(ctx, seqs, sh.page_size, rows_per_block, cache.shape[0]); });
  if (work.item_count == 0) return;
  const std::int64_t total_kv = work.total_kv;
  Buffer latent(DType::kBF16, Shape{total_kv, row_w}, ctx.allocator());
  GatherLatent(ctx, cache, sh, work.slots.ptr<std::int32_t>(), total_kv, latent);

  // Keys' and values' head parts: kv[j, h] = [k_nope (128) | v (128)] = latent[j, :lora] · kv_b[h]ᵀ.
  Buffer kv_b_holder, q_holder;
  const Tensor kv_b16 = AsBf16(ctx, kv_b, kv_b_holder);
  const Tensor q16 = AsBf16(ctx, q, q_holder);
  Buffer kv(DType::kBF16, Shape{total_kv, heads * (nope + vdim)}, ctx.allocator());
  GemmDesc g;
  g.trans_a = true;
  g.m = heads * (nope + vdim);
  g.n = total_kv;
  g.k = lora;
  g.a = kv_b16.data;
  g.a_type = CUDA_R_16BF;
  g.lda = lora;
  g.b = latent.tensor().data;
  g.b_type = CUDA_R_16BF;
  g.ldb = row_w;
  g.d = kv.tensor().data;
  g.d_type = CUDA_R_16BF;
  g.ldd = heads * (nope + vdim);
  FISSION_CHECK(ctx.Gemm(g), "cuBLASLt has no algorithm for the MLA key/value expansion");

  Params p{};
  p.positions = work.positions.ptr<std::int32_t>();
  p.qa = {q16.data, Elem::kBF16, heads * qk, qk, static_cast<int>(qk)};
  p.qb = {q16.data, Elem::kBF16, 0, 0, 0};
  p.ka = {kv.tensor().data, Elem::kBF16, heads * (nope + vdim), nope + vdim, static_cast<int>(nope)};
  p.kb = {static_cast<const __nv_bfloat16*>(latent.tensor().data) + lora, Elem::kBF16, row_w, 0,
          static_cast<int>(sh.qk_rope_head_dim)};
  p.v = {static_cast<const __nv_bfloat16*>(kv.tensor().data) + nope, Elem::kBF16, heads * (nope + vdim), nope + vdim,
         static_cast<int>(vdim)};
  p.seqs = work.seqs.ptr<const SeqInfo>();
  p.items = work.items.ptr<const WorkItem>();
  p.block_tables = nullptr;
  p.page_size = 0;
  p.heads = static_cast<int>(heads);
  p.rows_heads = 1;
  p.scale_log2 = sh.softmax_scale * kLog2e;
  p.out = out.data;
  p.out_elem = ElemOf(out);
  p.out_tok_stride = heads * vdim;
  p.out_head_stride = vdim;
  p.num_splits = 1;
  p.total_rows = 0;
  if (generic) {
    Launch<192, 128, false, 4>(ctx, p, work.item_count, static_cast<int>(heads));
    return;
  }
  static std::atomic<std::uint64_t> configured{0};  // per device, as in Launch
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(mla::PrefillKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(mla::PrefillSmem::kBytes)));
  mla::PrefillKernel<<<dim3(static_cast<unsigned>(work.item_count), static_cast<unsigned>(heads)), mla::kThreads,
                       mla::PrefillSmem::kBytes, ctx.stream()>>>(p);
  FISSION_LAUNCHED();
}

void MlaAttentionAbsorbed(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  CheckShapes(q, cache, kv_b, seqs, sh, out);
  // The tuned kernel is built for 512 + 64 latent rows; other shapes take the reference.
  if (!MlaTunedShape(sh, /*absorbed=*/true)) return MlaAttentionReference(ctx, q, cache, kv_b, seqs, sh, out);
  const std::int64_t heads = sh.num_heads, lora = sh.kv_lora_rank, row_w = cache.shape[1];
  const std::int64_t nope = sh.qk_nope_head_dim, qk = nope + sh.qk_rope_head_dim;
  const std::int64_t n = q.numel() / (heads * qk);
  const bool fp8 = sh.latent_format == LatentFormat::kFp8;
  const auto runs = QueryRuns(seqs);
  if (runs.empty()) return;
  Buffer kv_b_holder, q_holder;
  const Tensor kv_b16 = AsBf16(ctx, kv_b, kv_b_holder);
  const Tensor q16 = AsBf16(ctx, q, q_holder);
  const auto* wb = static_cast<const __nv_bfloat16*>(kv_b16.data);
  const auto* qb = static_cast<const __nv_bfloat16*>(q16.data);
  Buffer q_lat(DType::kBF16, Shape{n, heads, lora}, ctx.allocator());
  Buffer o_lat(DType::kBF16, Shape{n, heads, lora}, ctx.allocator());
  AbsorbQueries(ctx, wb, qb, q_lat.ptr<__nv_bfloat16>(), runs, sh);

  // Work: 16 or 64 (token, head) rows of one sequence per block (16 when no sequence has more, so
  // no tensor work goes to empty rows), the keys split so that the grid fills the chip. A uniform
  // step (pure decode or verify runs) builds its list on the device (capturable, and the same
  // list eagerly); any other batch on the host.
  std::int64_t max_rows = 0;
  for (const SeqAttention& s : seqs) max_rows = std::max<std::int64_t>(max_rows, s.query_len * heads);
  const int rows_per_block = max_rows <= 16 ? 16 : mla::kMaxRows;
  // Every layer of a step has the same list: it is built by the first.
  const AbsorbedWork& work = ctx.StepMemo<AbsorbedWork>(
      {"mla.absorbed", seqs.data(), seqs.size(), heads, rows_per_block, sh.page_size},
      seqs[0].query_positions.data(), [&] {
        const std::int64_t tokens = UniformQueries(seqs, n);
        return tokens > 0 ? PlanDecodeOnDevice(ctx, seqs, tokens, heads, sh.page_size, rows_per_block)
                          : PlanOnHost(ctx, seqs, heads, rows_per_block);
      });
  const int splits = work.splits;
  Buffer part_o, part_lse;
  if (splits > 1) {
    part_o = Buffer(DType::kF32, Shape{splits, n * heads, lora}, ctx.allocator());
    part_lse = Buffer(DType::kF32, Shape{splits, n * heads}, ctx.allocator());
  }
  Params p{};
  p.qa = {q_lat.tensor().data, Elem::kBF16, heads * lora, lora, static_cast<int>(lora)};
  p.qb = {qb + nope, Elem::kBF16, heads * qk, qk, static_cast<int>(sh.qk_rope_head_dim)};
  // Exact rows are copied into the key tiles as they are; FP8 entries are decoded there (p.latent).
  p.ka = {cache.data, fp8 ? Elem::kBF16 : ElemOf(cache), row_w, 0, static_cast<int>(row_w)};
  p.kb = {cache.data, fp8 ? Elem::kBF16 : ElemOf(cache), 0, 0, 0};
  p.latent = LatentRowsOf(cache, sh);
  FISSION_CHECK(!fp8 || row_w == mla::kFp8Entry, "the absorbed kernel stages ", mla::kFp8Entry,
                "-byte FP8 entries, got ", row_w);
  p.seqs = work.seqs.ptr<const SeqInfo>();
  p.items = work.items.ptr<const WorkItem>();
  p.block_tables = work.tables.ptr<const std::int32_t>();
  p.positions = work.positions.ptr<const std::int32_t>();
  p.page_size = static_cast<int>(sh.page_size);
  p.heads = static_cast<int>(heads);
  p.rows_heads = static_cast<int>(heads);
  p.scale_log2 = sh.softmax_scale * kLog2e;
  p.out = o_lat.tensor().data;
  p.out_elem = Elem::kBF16;
  p.out_tok_stride = heads * lora;
  p.out_head_stride = lora;
  p.num_splits = splits;
  p.part_o = splits > 1 ? part_o.ptr<float>() : nullptr;
  p.part_lse = splits > 1 ? part_lse.ptr<float>() : nullptr;
  p.total_rows = n * heads;
  if (rows_per_block == 16)
    Launch<576, 512, true, 1>(ctx, p, work.item_count, 1);
  else
    Launch<576, 512, true, 4>(ctx, p, work.item_count, 1);
  if (splits > 1 && work.merge_count > 0) {
    mla::MergeKernel<<<static_cast<unsigned>(work.merge_count), 256, 0, ctx.stream()>>>(
        part_o.ptr<float>(), part_lse.ptr<float>(), splits, n * heads, static_cast<int>(lora),
        work.merge_rows.ptr<const std::int64_t>(), o_lat.tensor().data, Elem::kBF16);
    FISSION_LAUNCHED();
  }
  ProjectValues(ctx, wb, o_lat.ptr<__nv_bfloat16>(), out, runs, sh);
}

}  // namespace fission::kernels::cuda
