// Host side of MLA attention: builds the per-sequence metadata and work list, prepares the operands
// of each form, launches mla::FlashKernel and, for split keys, mla::MergeKernel.
#include <atomic>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mla_flash.cuh"
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
  FISSION_CHECK(cache.rank() == 2 && cache.shape[1] == sh.kv_lora_rank + sh.qk_rope_head_dim, "latent row width ",
                cache.shape.ToString());
  FISSION_CHECK(q.numel() % (heads * qk) == 0 && kv_b.shape[0] == heads * (sh.qk_nope_head_dim + sh.v_head_dim) &&
                kv_b.shape[1] == sh.kv_lora_rank, "MLA q", q.shape.ToString(), " kv_b", kv_b.shape.ToString());
  const std::int64_t n = q.numel() / (heads * qk);
  FISSION_CHECK(out.numel() == n * heads * sh.v_head_dim, "MLA out ", out.shape.ToString());
  for (const SeqAttention& s : seqs) {
    FISSION_CHECK(static_cast<std::int64_t>(s.block_table.size()) * sh.page_size >= s.kv_len, "block table of ",
                  s.block_table.size(), " pages cannot hold ", s.kv_len, " tokens");
    FISSION_CHECK(s.query_start >= 0 && s.query_start + s.query_len <= n, "sequence rows out of range");
    FISSION_CHECK(static_cast<std::int32_t>(s.query_positions.size()) == s.query_len, "query positions");
    for (std::int32_t pos : s.query_positions) FISSION_CHECK(pos >= 0 && pos < s.kv_len, "query position ", pos);
    for (std::int32_t page : s.block_table)
      FISSION_CHECK(page >= 0 && (page + 1) * sh.page_size <= cache.shape[0], "page ", page, " outside the cache");
  }
}

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

}  // namespace

void MlaAttentionExpanded(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  CheckShapes(q, cache, kv_b, seqs, sh, out);
  // The tuned kernel is built for DeepSeek-V3's 128/64/128 heads; other shapes take the reference.
  if (!MlaTunedShape(sh, /*absorbed=*/false)) return MlaAttentionReference(ctx, q, cache, kv_b, seqs, sh, out);
  const std::int64_t heads = sh.num_heads, lora = sh.kv_lora_rank, row_w = cache.shape[1];
  const std::int64_t nope = sh.qk_nope_head_dim, vdim = sh.v_head_dim, qk = nope + sh.qk_rope_head_dim;
  // The register-softmax kernel (mla_prefill.cuh) by default; FISSION_MLA_PREFILL=generic selects the
  // shared-memory-softmax kernel (mla_flash.cuh), kept for comparison.
  const char* choice = std::getenv("FISSION_MLA_PREFILL");
  const bool generic = choice != nullptr && std::strcmp(choice, "generic") == 0;
  const int rows_per_block = generic ? mla::kMaxRows : mla::kPrefillRows;
  // Gather every sequence's latent rows (cached prefix and new tokens) into one contiguous bf16 block.
  std::vector<SeqInfo> infos;
  std::vector<std::int64_t> slots;
  std::vector<std::int32_t> positions;
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const SeqAttention& s = seqs[i];
    const int kv_len = s.kv_len;
    infos.push_back({s.query_start, s.query_len, kv_len, static_cast<int>(slots.size()), 0,
                     static_cast<int>(positions.size())});
    positions.insert(positions.end(), s.query_positions.begin(), s.query_positions.end());
    for (int p = 0; p < kv_len; ++p)
      slots.push_back(static_cast<std::int64_t>(s.block_table[p / sh.page_size]) * sh.page_size + p % sh.page_size);
    for (int r = 0; r < s.query_len; r += rows_per_block)
      items.push_back({static_cast<int>(i), r, 0, kv_len, 0});
  }
  if (items.empty()) return;
  // Most keys first (by the block's last row), so the longest blocks start early.
  auto reach = [&](const WorkItem& w) {
    const SeqAttention& s = seqs[w.seq];
    return s.query_positions[std::min(w.row_begin + rows_per_block, s.query_len) - 1];
  };
  std::stable_sort(items.begin(), items.end(),
                   [&](const WorkItem& a, const WorkItem& b) { return reach(a) > reach(b); });
  const std::int64_t total_kv = static_cast<std::int64_t>(slots.size());
  Buffer latent(DType::kBF16, Shape{total_kv, row_w}, ctx.allocator());
  FISSION_CHECK(cache.shape[0] < (std::int64_t{1} << 31), "cache too large for 32-bit slots");
  std::vector<std::int32_t> slots32(slots.begin(), slots.end());
  DeviceMeta slot32_dev = ctx.Upload(std::span<const std::int32_t>(slots32));
  GatherRowsDevice(ctx, cache, slot32_dev.ptr<std::int32_t>(), total_kv, latent);

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

  DeviceMeta info_dev = ctx.Upload(std::span<const SeqInfo>(infos));
  DeviceMeta items_dev = ctx.Upload(std::span<const WorkItem>(items));
  DeviceMeta positions_dev = ctx.Upload(std::span<const std::int32_t>(positions));
  Params p{};
  p.positions = positions_dev.ptr<std::int32_t>();
  p.qa = {q16.data, Elem::kBF16, heads * qk, qk, static_cast<int>(qk)};
  p.qb = {q16.data, Elem::kBF16, 0, 0, 0};
  p.ka = {kv.tensor().data, Elem::kBF16, heads * (nope + vdim), nope + vdim, static_cast<int>(nope)};
  p.kb = {static_cast<const __nv_bfloat16*>(latent.tensor().data) + lora, Elem::kBF16, row_w, 0,
          static_cast<int>(sh.qk_rope_head_dim)};
  p.v = {static_cast<const __nv_bfloat16*>(kv.tensor().data) + nope, Elem::kBF16, heads * (nope + vdim), nope + vdim,
         static_cast<int>(vdim)};
  p.seqs = reinterpret_cast<const SeqInfo*>(info_dev.tensor().data);
  p.items = reinterpret_cast<const WorkItem*>(items_dev.tensor().data);
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
    Launch<192, 128, false, 4>(ctx, p, static_cast<int>(items.size()), static_cast<int>(heads));
    return;
  }
  static std::atomic<std::uint64_t> configured{0};  // per device, as in Launch
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(mla::PrefillKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(mla::PrefillSmem::kBytes)));
  mla::PrefillKernel<<<dim3(static_cast<unsigned>(items.size()), static_cast<unsigned>(heads)), mla::kThreads,
                       mla::PrefillSmem::kBytes, ctx.stream()>>>(p);
  FISSION_LAUNCHED();
}

void MlaAttentionAbsorbed(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out) {
  CheckShapes(q, cache, kv_b, seqs, sh, out);
  // The tuned kernel is built for 512 + 64 latent rows; other shapes take the reference.
  if (!MlaTunedShape(sh, /*absorbed=*/true)) return MlaAttentionReference(ctx, q, cache, kv_b, seqs, sh, out);
  const std::int64_t heads = sh.num_heads, lora = sh.kv_lora_rank, row_w = cache.shape[1];
  const std::int64_t nope = sh.qk_nope_head_dim, vdim = sh.v_head_dim, qk = nope + sh.qk_rope_head_dim;
  const std::int64_t n = q.numel() / (heads * qk);
  const auto runs = QueryRuns(seqs);
  if (runs.empty()) return;
  Buffer kv_b_holder, q_holder;
  const Tensor kv_b16 = AsBf16(ctx, kv_b, kv_b_holder);
  const Tensor q16 = AsBf16(ctx, q, q_holder);
  const auto* wb = static_cast<const __nv_bfloat16*>(kv_b16.data);
  const auto* qb = static_cast<const __nv_bfloat16*>(q16.data);

  // q_latent[t, h] = q_nope[t, h] · W_UK[h] (W_UK[h] = kv_b rows h·(nope+v) + [0, nope)), per run of rows.
  Buffer q_lat(DType::kBF16, Shape{n, heads, lora}, ctx.allocator());
  Buffer o_lat(DType::kBF16, Shape{n, heads, lora}, ctx.allocator());
  auto* ql = static_cast<__nv_bfloat16*>(q_lat.tensor().data);
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

  // Work: 16 or 64 (token, head) rows of one sequence per block (16 when no sequence has more, so
  // no tensor work goes to empty rows), the keys split so that the grid fills the chip.
  std::int64_t max_rows = 0;
  for (const SeqAttention& s : seqs) max_rows = std::max<std::int64_t>(max_rows, s.query_len * heads);
  const int rows_per_block = max_rows <= 16 ? 16 : mla::kMaxRows;
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
  // Splits: the fewest that fill at least 90% of the last wave of blocks (one block per
  // multiprocessor: both decode variants use more than half of its shared memory), at least 256
  // keys each.
  constexpr std::int64_t kMinKeysPerSplit = 256;
  const std::int64_t slots = ctx.sm_count();
  const std::int64_t max_splits =
      std::clamp<std::int64_t>((max_kv + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, mla::kMaxSplits);
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
  if (items.empty()) return;
  DeviceMeta info_dev = ctx.Upload(std::span<const SeqInfo>(infos));
  DeviceMeta items_dev = ctx.Upload(std::span<const WorkItem>(items));
  DeviceMeta tables_dev = ctx.Upload(std::span<const std::int32_t>(tables));
  DeviceMeta positions_dev = ctx.Upload(std::span<const std::int32_t>(positions));
  Buffer part_o, part_lse;
  if (splits > 1) {
    part_o = Buffer(DType::kF32, Shape{splits, n * heads, lora}, ctx.allocator());
    part_lse = Buffer(DType::kF32, Shape{splits, n * heads}, ctx.allocator());
  }
  Params p{};
  p.qa = {ql, Elem::kBF16, heads * lora, lora, static_cast<int>(lora)};
  p.qb = {qb + nope, Elem::kBF16, heads * qk, qk, static_cast<int>(sh.qk_rope_head_dim)};
  p.ka = {cache.data, ElemOf(cache), row_w, 0, static_cast<int>(row_w)};
  p.kb = {cache.data, ElemOf(cache), 0, 0, 0};
  p.seqs = reinterpret_cast<const SeqInfo*>(info_dev.tensor().data);
  p.items = reinterpret_cast<const WorkItem*>(items_dev.tensor().data);
  p.block_tables = tables_dev.ptr<std::int32_t>();
  p.positions = positions_dev.ptr<std::int32_t>();
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
    Launch<576, 512, true, 1>(ctx, p, static_cast<int>(items.size()), 1);
  else
    Launch<576, 512, true, 4>(ctx, p, static_cast<int>(items.size()), 1);
  if (splits > 1) {
    DeviceMeta rows_dev = ctx.Upload(std::span<const std::int64_t>(rows));
    mla::MergeKernel<<<static_cast<unsigned>(rows.size()), 256, 0, ctx.stream()>>>(
        part_o.ptr<float>(), part_lse.ptr<float>(), splits, n * heads, static_cast<int>(lora),
        rows_dev.ptr<std::int64_t>(), o_lat.tensor().data, Elem::kBF16);
    FISSION_LAUNCHED();
  }

  // out[t, h] = W_UV[h] · o_latent[t, h] (W_UV[h] = kv_b rows h·(nope+v) + nope + [0, v)), per run.
  const auto* ol = static_cast<const __nv_bfloat16*>(o_lat.tensor().data);
  Buffer out_tmp;
  const bool direct = out.dtype == DType::kF32 || out.dtype == DType::kBF16;
  FISSION_CHECK(direct, "MLA out must be fp32 or bf16");
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

}  // namespace fission::kernels::cuda
