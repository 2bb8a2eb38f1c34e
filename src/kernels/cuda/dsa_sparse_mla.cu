// MLA attention over the positions DeepSeek Sparse Attention selected (kernels/dsa_ops.h
// SparseMla), both forms computed in the latent space: q_latent = q_nope · W_UK[h] and, after
// attention, out = W_UV[h] · o_latent (the absorbed form's GEMMs of mla_attention.cu, shared through
// mla_host.h). With topk keys per query the absorbed form costs 2·heads·topk·(576 + 512) FLOP per
// query, against the expanded form's kv_b expansion of every selected row for every head, so the
// prefill (expanded) form runs the same kernel, as FlashMLA's sparse prefill does.
//
// SparseLatentKernel (kv_lora_rank 512, rope 64; fp32, bf16 or FP8 cache (entries decoded in
// registers), bf16 tensor cores with fp32 accumulation): one block of 8 warps per (query row, group
// of 64 heads, split of its selection), on the tile core of sparse_flash.cuh. The 64 heads' q rows
// [q_latent | q_rope] (576 values) stay in shared memory; the selected latent rows are gathered in
// tiles of 64 through the row's block table into two cp.async stages (the next tile's selection
// entries and table lookups are issued a tile ahead, in registers). V is the first 512 values of
// the same rows. Splits carry their log-sum-exp and are merged by mla::MergeKernel. Heads past the
// last are zero rows, not written.
//
// Other shapes (the test and demo models' small heads) take a plain fp32 kernel, one block per
// (query row, head), the reference kernel's formulation over the selected rows.
//
// A pure decode step takes its positions and tables from the input block (UploadPerSequence) and
// every block derives its key range from its row's position on the device: capturable.
#include <algorithm>
#include <atomic>
#include <climits>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/dsa_common.cuh"
#include "kernels/cuda/mla_flash.cuh"
#include "kernels/cuda/mla_host.h"
#include "kernels/cuda/mla_latent.cuh"
#include "kernels/cuda/sparse_flash.cuh"

namespace fission::kernels::cuda {
namespace {

using sparse_flash::kKeys, sparse_flash::kLog2e, sparse_flash::kRows, sparse_flash::kThreads;
constexpr int kDim = 576, kLatent = sparse_flash::kValues;
constexpr int kChunks = kDim / 8;  // 16-byte chunks of a row
constexpr int kQBytes = kRows * kDim * 2, kKBytes = kKeys * kDim * 2, kPBytes = kRows * kKeys * 2;
constexpr int kOffK = kQBytes, kOffP = kOffK + 2 * kKBytes, kOffRed = kOffP + kPBytes;
constexpr int kOffValid = kOffRed + 2 * kRows * 4;
constexpr int kSmemBytes = kOffValid + 2 * kKeys;  // 230016
// Keys of a split at least (two tiles). A split's partial rows (64 × 512 fp32, written and read
// once) cost about what 110 latent rows do; but a batch too small to fill the chip is bound by
// the latency of its tiles, so short splits pay (batch 1, 2048 keys, 128 heads: 32 blocks of 2
// tiles rather than 8 of 8).
constexpr int kMinKeysPerSplit = 2 * kKeys;

struct SparseToken {
  std::int32_t row, bt_offset, pos_offset;
};

struct SparseArgs {
  const __nv_bfloat16* q_lat = nullptr;  // [n, heads, 512]
  const __nv_bfloat16* q_rope = nullptr;  // row (token, head) at token · tok_stride + head · head_stride
  std::int64_t rope_tok_stride = 0, rope_head_stride = 0;
  const void* cache = nullptr;
  bool cache_bf16 = true;
  LatentRows latent;  // latent.fp8: FP8 entries of latent.stride bytes
  const std::int32_t* topk = nullptr;
  int width = 0;
  const SparseToken* tokens = nullptr;  // null: a pure decode step, token i is sequence i's row i
  const std::int32_t* tables = nullptr;
  const std::int32_t* positions = nullptr;
  int table_width = 0, page_size = 0, reach = 0;
  int heads = 0, head_groups = 1, splits = 1;
  float scale_log2 = 0.0f;
  __nv_bfloat16* out = nullptr;  // o_latent [n, heads, 512] when splits == 1
  float* part_o = nullptr;
  float* part_lse = nullptr;
  std::int64_t total_rows = 0;
};

// 16-byte chunk `chunk` of row `row` of a [rows][72 chunks] tile (sparse_flash.cuh's swizzle).
__device__ __forceinline__ int Swz(int row, int chunk) { return sparse_flash::Swz<kChunks>(row, chunk); }

// The 64 heads' q rows: thread (row tid / 4) copies chunks tid % 4 + 4i (64 contiguous bytes of
// the row per 4 threads and instruction).
__device__ __forceinline__ void LoadQ(unsigned char* qs, const SparseArgs& a, std::int64_t token, int head0) {
  const int r = threadIdx.x >> 2, q = threadIdx.x & 3, head = head0 + r;
  const bool ok = head < a.heads;
  const __nv_bfloat16* lat = a.q_lat + (token * a.heads + (ok ? head : 0)) * kLatent;
  const __nv_bfloat16* rope = a.q_rope + token * a.rope_tok_stride + (ok ? head : 0) * a.rope_head_stride;
#pragma unroll
  for (int i = 0; i < kChunks / 4; ++i) {
    const int c = q + 4 * i;
    const __nv_bfloat16* src = c < kLatent / 8 ? lat + 8 * c : rope + 8 * (c - kLatent / 8);
    mla::CpAsync16(qs + 16 * Swz(r, c), src, ok ? 16 : 0);
  }
}

// Key row tid / 4 of a tile from cache slot `slot` (zeros for -1), chunks as in LoadQ. An fp32
// cache is converted and FP8 entries decoded through registers.
__device__ __forceinline__ void LoadKeys(unsigned char* ks, const SparseArgs& a, std::int64_t slot) {
  const int r = threadIdx.x >> 2, q = threadIdx.x & 3;
  if (a.latent.fp8) {
    const auto* entry = static_cast<const std::uint8_t*>(a.cache) + (slot < 0 ? 0 : slot) * a.latent.stride;
#pragma unroll 6
    for (int i = 0; i < kChunks / 4; ++i) {
      const int c = q + 4 * i;
      *reinterpret_cast<uint4*>(ks + 16 * Swz(r, c)) =
          slot >= 0 ? Fp8LatentChunk(entry, kLatent, c) : make_uint4(0, 0, 0, 0);
    }
    return;
  }
  const std::int64_t base = (slot < 0 ? 0 : slot) * kDim;
  if (a.cache_bf16) {
    const __nv_bfloat16* row = static_cast<const __nv_bfloat16*>(a.cache) + base;
#pragma unroll
    for (int i = 0; i < kChunks / 4; ++i) {
      const int c = q + 4 * i;
      mla::CpAsync16(ks + 16 * Swz(r, c), row + 8 * c, slot >= 0 ? 16 : 0);
    }
    return;
  }
#pragma unroll 6
  for (int i = 0; i < kChunks / 4; ++i) {
    const int c = q + 4 * i;
    *reinterpret_cast<uint4*>(ks + 16 * Swz(r, c)) =
        slot >= 0 ? mla::Load8(a.cache, base + 8 * c, Elem::kF32) : make_uint4(0, 0, 0, 0);
  }
}

// The cache slot of selection entry `key` (-1 past the split, for an entry of -1, or for a
// position the row cannot see: nothing outside its table is read).
__device__ __forceinline__ std::int64_t SlotOf(int sel, int page, const std::int32_t* table, int visible) {
  if (sel < 0 || sel >= visible) return -1;
  return static_cast<std::int64_t>(table[sel / page]) * page + sel % page;
}

__global__ void __launch_bounds__(kThreads, 1) SparseLatentKernel(const SparseArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* qs = smem;
  unsigned char* ps = smem + kOffP;
  float* red = reinterpret_cast<float*>(smem + kOffRed);
  unsigned char* valid = smem + kOffValid;

  const int idx = blockIdx.x, hg = idx % a.head_groups, rest = idx / a.head_groups;
  const int split = rest % a.splits, ti = rest / a.splits;
  const SparseToken tk = a.tokens != nullptr ? a.tokens[ti] : SparseToken{ti, ti * a.table_width, ti};
  const int visible = dsa::VisibleKeys(a.positions[tk.pos_offset], a.reach);
  const int count = min(a.width, visible);  // distinct selected positions are at most `visible`
  const int chunk = max(kKeys, ((count + a.splits - 1) / a.splits + kKeys - 1) / kKeys * kKeys);
  const int kb = split * chunk, ke = min(count, kb + chunk);
  const int head0 = hg * kRows, tid = threadIdx.x;
  const std::int64_t token = tk.row;
  if (kb >= ke) {  // an empty split adds nothing: lse -inf, which the merge skips
    if (tid < kRows && head0 + tid < a.heads)
      a.part_lse[split * a.total_rows + token * a.heads + head0 + tid] = -INFINITY;
    return;
  }
  const sparse_flash::Lane ln = sparse_flash::LaneOf(tid);
  const std::int32_t* sel_row = a.topk + token * a.width;
  const std::int32_t* table = a.tables + tk.bt_offset;
  const int lr = tid >> 2, page = a.page_size;

  LoadQ(qs, a, token, head0);
  const std::int64_t slot = kb + lr < ke ? SlotOf(sel_row[kb + lr], page, table, visible) : -1;
  LoadKeys(smem + kOffK, a, slot);
  if ((tid & 3) == 0) valid[lr] = slot >= 0;
  mla::CpAsyncCommit();
  const int tiles = (ke - kb + kKeys - 1) / kKeys;
  std::int64_t next_slot = kb + kKeys + lr < ke ? SlotOf(sel_row[kb + kKeys + lr], page, table, visible) : -1;

  sparse_flash::RowState st;
  sparse_flash::Reset(st);
  for (int it = 0; it < tiles; ++it) {
    mla::CpAsyncWait<0>();
    __syncthreads();  // the tile has landed for every thread, and the other stage was read last time
    const int stage = it & 1;
    if (it + 1 < tiles) {
      LoadKeys(smem + kOffK + (stage ^ 1) * kKBytes, a, next_slot);
      if ((tid & 3) == 0) valid[(stage ^ 1) * kKeys + lr] = next_slot >= 0;
    }
    mla::CpAsyncCommit();
    const int after = kb + (it + 2) * kKeys + lr;  // the tile after next: its entry now, its slot after S
    const int sel_after = after < ke ? sel_row[after] : -1;
    const unsigned char* ks = smem + kOffK + stage * kKBytes;
    float s[4][4];
    sparse_flash::Scores<kChunks>(qs, ks, ln, s);
    next_slot = SlotOf(sel_after, page, table, visible);
    std::uint32_t pf[2][4];
    sparse_flash::SoftmaxTile(s, valid + stage * kKeys, a.scale_log2, red, ps, ln, st, pf);
    sparse_flash::AccumulateValues<kChunks>(pf, ps, ks, ln, st);
  }
  float total0, total1;
  sparse_flash::RowTotals(st, red, ln, &total0, &total1);
  sparse_flash::RowSink sink;
  sink.row0 = token * a.heads + head0;
  sink.rows = min(kRows, a.heads - head0);
  sink.split = split;
  sink.splits = a.splits;
  sink.total_rows = a.total_rows;
  sink.part_o = a.part_o;
  sink.part_lse = a.part_lse;
  sparse_flash::StoreRows(st, total0, total1, ln, sink, a.out);
}

// The fp32 kernel for other shapes: grid (rows, heads), scores of up to kRefMaxKeys selected keys
// in shared memory.
constexpr int kRefThreads = 128, kRefMaxKeys = 8192;

struct RefRow {
  std::int32_t row, bt_offset, position;
};

__device__ float RefBlockReduce(float v, float* red, bool max) {
  for (int o = 16; o > 0; o >>= 1) {
    const float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = max ? fmaxf(v, other) : v + other;
  }
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kRefThreads / 32; ++w) r = max ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();
  return r;
}

__global__ void SparseReferenceKernel(const void* q, Elem qe, LatentRows cache, const void* kv_b, Elem we,
                                      const std::int32_t* topk, int width, const RefRow* rows,
                                      const std::int32_t* tables, int page, void* out, Elem oe, int heads, int nope,
                                      int rope, int vdim, int lora, float scale) {
  extern __shared__ float smem_f[];
  float* q_lat = smem_f;
  float* o_lat = q_lat + lora;
  float* scores = o_lat + lora;
  __shared__ float red[kRefThreads / 32];
  __shared__ int count;
  const int h = blockIdx.y;
  const RefRow info = rows[blockIdx.x];
  const std::int64_t row = info.row;
  const std::int32_t* sel = topk + row * width;
  const std::int32_t* table = tables + info.bt_offset;
  if (threadIdx.x == 0) count = width;
  __syncthreads();
  for (int j = threadIdx.x; j < width; j += kRefThreads)
    if (sel[j] < 0) atomicMin(&count, j);  // the selection ends at its first -1
  const std::int64_t qk = nope + rope, q_base = (row * heads + h) * qk;
  const std::int64_t w_base = static_cast<std::int64_t>(h) * (nope + vdim) * lora;
  for (int l = threadIdx.x; l < lora; l += kRefThreads) {
    float acc = 0.0f;
    for (int d = 0; d < nope; ++d)
      acc += LoadF(q, q_base + d, qe) * LoadF(kv_b, w_base + static_cast<std::int64_t>(d) * lora + l, we);
    q_lat[l] = acc;
  }
  __syncthreads();
  const int keys = min(count, kRefMaxKeys);
  auto slot_of = [&](int j) {
    const int p = min(max(sel[j], 0), info.position);
    return static_cast<std::int64_t>(table[p / page]) * page + p % page;
  };
  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < keys; j += kRefThreads) {
    const std::int64_t slot = slot_of(j);
    float s = 0.0f;
    for (int l = 0; l < lora; ++l) s += q_lat[l] * LatentValue(cache, slot, l);
    for (int r = 0; r < rope; ++r) s += LoadF(q, q_base + nope + r, qe) * LatentValue(cache, slot, lora + r);
    scores[j] = s * scale;
    local_max = fmaxf(local_max, scores[j]);
  }
  const float m = RefBlockReduce(local_max, red, true);
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < keys; j += kRefThreads) {
    scores[j] = __expf(scores[j] - m);
    local_sum += scores[j];
  }
  const float sum = RefBlockReduce(local_sum, red, false);  // also orders the score writes before the reads
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int l = threadIdx.x; l < lora; l += kRefThreads) {
    float acc = 0.0f;
    for (int j = 0; j < keys; ++j) acc += scores[j] * LatentValue(cache, slot_of(j), l);
    o_lat[l] = acc * inv;
  }
  __syncthreads();
  const std::int64_t out_base = (row * heads + h) * vdim;
  for (int v = threadIdx.x; v < vdim; v += kRefThreads) {
    const std::int64_t wv = w_base + static_cast<std::int64_t>(nope + v) * lora;
    float acc = 0.0f;
    for (int l = 0; l < lora; ++l) acc += LoadF(kv_b, wv + l, we) * o_lat[l];
    StoreF(out, out_base + v, oe, acc);
  }
}

void SparseReference(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b, const Tensor& topk,
                     std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  FISSION_CHECK(topk.shape[1] <= kRefMaxKeys, "the fp32 sparse MLA kernel takes up to ", kRefMaxKeys,
                " selected keys a row, got ", topk.shape[1]);
  FISSION_CHECK(sh.kv_lora_rank <= 2048, "the fp32 sparse MLA kernel takes kv_lora_rank up to 2048");
  std::vector<RefRow> rows;
  std::vector<std::int32_t> tables;
  for (const SeqAttention& s : seqs) {
    const auto bt = static_cast<std::int32_t>(tables.size());
    tables.insert(tables.end(), s.block_table.begin(), s.block_table.end());
    for (int t = 0; t < s.query_len; ++t) rows.push_back({s.query_start + t, bt, s.query_positions[t]});
  }
  if (rows.empty()) return;
  if (tables.empty()) tables.push_back(0);
  DeviceMeta rows_dev = ctx.Upload(std::span<const RefRow>(rows));
  DeviceMeta tables_dev = ctx.Upload(std::span<const std::int32_t>(tables));
  const std::size_t smem = (2 * static_cast<std::size_t>(sh.kv_lora_rank) + kRefMaxKeys) * sizeof(float);
  SparseReferenceKernel<<<dim3(static_cast<unsigned>(rows.size()), static_cast<unsigned>(sh.num_heads)), kRefThreads,
                          smem, ctx.stream()>>>(
      q.data, ElemOf(q), LatentRowsOf(cache, sh), kv_b.data, ElemOf(kv_b), topk.ptr<const std::int32_t>(),
      static_cast<int>(topk.shape[1]), rows_dev.ptr<const RefRow>(), tables_dev.ptr<const std::int32_t>(),
      static_cast<int>(sh.page_size), out.data, ElemOf(out), static_cast<int>(sh.num_heads),
      static_cast<int>(sh.qk_nope_head_dim), static_cast<int>(sh.qk_rope_head_dim), static_cast<int>(sh.v_head_dim),
      static_cast<int>(sh.kv_lora_rank), sh.softmax_scale);
  FISSION_LAUNCHED();
}

// A host-planned call's tokens (every query row of the step) and the rows the split merge writes.
struct SparseWork {
  DeviceMeta tokens, positions, tables, merge_rows;
  std::int64_t token_count = 0, merge_count = 0;
  int splits = 1;
};

SparseWork PlanSparse(CudaContext& ctx, std::span<const SeqAttention> seqs, const MlaShape& sh, int width,
                      int head_groups) {
  std::vector<SparseToken> tokens;
  std::vector<std::int32_t> positions, tables;
  for (const SeqAttention& s : seqs) {
    const auto bt = static_cast<std::int32_t>(tables.size()), pos = static_cast<std::int32_t>(positions.size());
    tables.insert(tables.end(), s.block_table.begin(), s.block_table.end());
    positions.insert(positions.end(), s.query_positions.begin(), s.query_positions.end());
    for (int t = 0; t < s.query_len; ++t) tokens.push_back({s.query_start + t, bt, pos + t});
  }
  if (tables.empty()) tables.push_back(0);
  SparseWork w;
  w.token_count = static_cast<std::int64_t>(tokens.size());
  w.splits = PickSplits(w.token_count * head_groups, std::max(1, (width + kMinKeysPerSplit - 1) / kMinKeysPerSplit),
                        ctx.sm_count());
  w.tokens = ctx.Upload(std::span<const SparseToken>(tokens));
  w.positions = ctx.Upload(std::span<const std::int32_t>(positions));
  w.tables = ctx.Upload(std::span<const std::int32_t>(tables));
  if (w.splits > 1) {
    std::vector<std::int64_t> rows;
    for (const SparseToken& t : tokens)
      for (std::int64_t h = 0; h < sh.num_heads; ++h) rows.push_back(t.row * sh.num_heads + h);
    w.merge_rows = ctx.Upload(std::span<const std::int64_t>(rows));
    w.merge_count = static_cast<std::int64_t>(rows.size());
  }
  return w;
}

}  // namespace

void SparseMla(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b, const Tensor& topk,
               std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  const std::int64_t heads = sh.num_heads, qk = sh.qk_nope_head_dim + sh.qk_rope_head_dim;
  FISSION_CHECK(cache.rank() == 2 && cache.shape[1] == LatentRowWidth(sh) &&
                    (sh.latent_format == LatentFormat::kExact || cache.dtype == DType::kU8),
                "latent cache ", cache.shape.ToString(), " ", DTypeName(cache.dtype), " for rows of ", LatentRowWidth(sh));
  FISSION_CHECK(heads > 0 && q.numel() % (heads * qk) == 0 && kv_b.shape[0] == heads * (sh.qk_nope_head_dim + sh.v_head_dim) &&
                    kv_b.shape[1] == sh.kv_lora_rank,
                "SparseMla q", q.shape.ToString(), " kv_b", kv_b.shape.ToString());
  const std::int64_t n = q.numel() / (heads * qk);
  FISSION_CHECK(out.numel() == n * heads * sh.v_head_dim, "SparseMla out ", out.shape.ToString());
  FISSION_CHECK(topk.data != nullptr && topk.dtype == DType::kI32 && topk.rank() == 2 && topk.shape[0] == n &&
                    topk.shape[1] >= 1,
                "SparseMla topk ", topk.shape.ToString(), " for ", n, " rows");
  FISSION_CHECK(cache.shape[0] < (std::int64_t{1} << 31) && sh.page_size > 0, "SparseMla cache/page size");
  CheckSeqAttention(seqs, n, cache, sh.page_size);
  if (!MlaTunedShape(sh, /*absorbed=*/true)) return SparseReference(ctx, q, cache, kv_b, topk, seqs, sh, out);
  const auto runs = QueryRuns(seqs);
  if (runs.empty()) return;
  const std::int64_t lora = sh.kv_lora_rank, nope = sh.qk_nope_head_dim;
  const int width = static_cast<int>(topk.shape[1]);
  Buffer kv_b_holder, q_holder;
  const Tensor kv_b16 = AsBf16(ctx, kv_b, kv_b_holder);
  const Tensor q16 = AsBf16(ctx, q, q_holder);
  const auto* wb = static_cast<const __nv_bfloat16*>(kv_b16.data);
  const auto* qb = static_cast<const __nv_bfloat16*>(q16.data);
  Buffer q_lat(DType::kBF16, Shape{n, heads, lora}, ctx.allocator());
  Buffer o_lat(DType::kBF16, Shape{n, heads, lora}, ctx.allocator());
  AbsorbQueries(ctx, wb, qb, q_lat.ptr<__nv_bfloat16>(), runs, sh);

  SparseArgs a;
  a.q_lat = q_lat.ptr<const __nv_bfloat16>();
  a.q_rope = qb + nope;
  a.rope_tok_stride = heads * qk;
  a.rope_head_stride = qk;
  a.cache = cache.data;
  a.latent = LatentRowsOf(cache, sh);
  a.cache_bf16 = !a.latent.fp8 && ElemOf(cache) == Elem::kBF16;
  a.topk = topk.ptr<const std::int32_t>();
  a.width = width;
  a.page_size = static_cast<int>(sh.page_size);
  a.heads = static_cast<int>(heads);
  a.head_groups = static_cast<int>((heads + kRows - 1) / kRows);
  a.scale_log2 = sh.softmax_scale * kLog2e;
  a.out = o_lat.ptr<__nv_bfloat16>();
  a.total_rows = n * heads;

  std::int64_t token_count = 0, merge_count = 0;
  const std::int64_t* merge_rows = nullptr;
  DeviceMeta positions, tables;  // a pure decode step's (the host plan keeps its own)
  if (PureDecode(seqs, n)) {
    std::int64_t position_width = 0, table_width = 0;
    positions = UploadPerSequence(ctx, seqs, [](const SeqAttention& s) { return s.query_positions; }, &position_width);
    tables = UploadPerSequence(ctx, seqs, [](const SeqAttention& s) { return s.block_table; }, &table_width);
    FISSION_CHECK(position_width == 1 && table_width * sh.page_size < INT_MAX, "decode positions/tables");
    a.positions = positions.ptr<const std::int32_t>();
    a.tables = tables.ptr<const std::int32_t>();
    a.table_width = static_cast<int>(table_width);
    a.reach = static_cast<int>(table_width * sh.page_size);
    a.splits = PickSplits(n * a.head_groups, std::max(1, (width + kMinKeysPerSplit - 1) / kMinKeysPerSplit),
                          ctx.sm_count());
    token_count = n;
    merge_count = n * heads;  // every row: the merge's null row list
  } else {
    const SparseWork& w = ctx.StepMemo<SparseWork>(
        {"dsa.sparse", seqs.data(), seqs.size(), heads, width, sh.page_size}, seqs[0].query_positions.data(),
        [&] { return PlanSparse(ctx, seqs, sh, width, a.head_groups); });
    a.tokens = w.tokens.ptr<const SparseToken>();
    a.positions = w.positions.ptr<const std::int32_t>();
    a.tables = w.tables.ptr<const std::int32_t>();
    a.reach = INT_MAX;
    a.splits = w.splits;
    token_count = w.token_count;
    merge_count = w.merge_count;
    merge_rows = w.splits > 1 ? w.merge_rows.ptr<const std::int64_t>() : nullptr;
  }
  Buffer part_o, part_lse;
  if (a.splits > 1) {
    part_o = Buffer(DType::kF32, Shape{a.splits, n * heads, lora}, ctx.allocator());
    part_lse = Buffer(DType::kF32, Shape{a.splits, n * heads}, ctx.allocator());
    a.part_o = part_o.ptr<float>();
    a.part_lse = part_lse.ptr<float>();
  }
  const std::int64_t blocks = token_count * a.splits * a.head_groups;
  FISSION_CHECK(blocks < (std::int64_t{1} << 31), "SparseMla: too many blocks (", blocks, ")");
  static std::atomic<std::uint64_t> configured{0};  // the attribute is per device
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(SparseLatentKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  if (blocks > 0) {
    SparseLatentKernel<<<static_cast<unsigned>(blocks), kThreads, kSmemBytes, ctx.stream()>>>(a);
    FISSION_LAUNCHED();
  }
  if (a.splits > 1 && merge_count > 0) {
    mla::MergeKernel<<<static_cast<unsigned>(merge_count), 256, 0, ctx.stream()>>>(
        part_o.ptr<float>(), part_lse.ptr<float>(), a.splits, n * heads, static_cast<int>(lora), merge_rows,
        o_lat.tensor().data, Elem::kBF16);
    FISSION_LAUNCHED();
  }
  ProjectValues(ctx, wb, o_lat.ptr<__nv_bfloat16>(), out, runs, sh);
}

}  // namespace fission::kernels::cuda
