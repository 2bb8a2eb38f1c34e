#include "model/layers/v4_attention.h"

#include <cmath>

namespace fission::model {

V4Attention::V4Attention(const io::ModelConfig& c, std::int64_t layer, WeightLoader& loader, const RankInfo& rank,
                         const RopeTables& main_rope, const RopeTables& compress_rope, kernels::V4KvFormat format,
                         kernels::IndexKeyFormat index_keys)
    : config_(c),
      kind_(c.v4->attention[static_cast<std::size_t>(layer)]),
      ratio_(c.v4->compress_ratio[static_cast<std::size_t>(layer)]),
      eps_(static_cast<float>(c.rms_norm_eps)),
      format_(format) {
  const io::V4Config& v4 = *c.v4;
  const std::string prefix = StrCat("layers.", layer, ".attn.");
  const std::int64_t d = v4.head_dim, hidden = c.hidden_size;
  const Range heads = EvenPart(c.num_attention_heads, rank.attn_tp_size(), rank.attn_tp_rank(), "num_attention_heads");
  const Range groups = EvenPart(v4.o_groups, rank.attn_tp_size(), rank.attn_tp_rank(), "o_groups");
  heads_ = heads.size(c.num_attention_heads);
  groups_ = groups.size(v4.o_groups);
  const std::int64_t per_group = c.num_attention_heads * d / v4.o_groups;  // a group's input width
  wq_a_ = loader.LoadLinear(prefix + "wq_a.weight", Shape{c.q_lora_rank, hidden});
  q_norm_ = loader.LoadNorm(prefix + "q_norm.weight", c.q_lora_rank);
  wq_b_ = loader.LoadLinear(prefix + "wq_b.weight", Shape{c.num_attention_heads * d, c.q_lora_rank},
                            {heads.begin * d, heads.stop(c.num_attention_heads) * d});
  wkv_ = loader.LoadLinear(prefix + "wkv.weight", Shape{d, hidden});
  kv_norm_ = loader.LoadNorm(prefix + "kv_norm.weight", d);
  wo_a_ = loader.Load(prefix + "wo_a.weight", Shape{v4.o_groups * v4.o_lora_rank, per_group},
                      {groups.begin * v4.o_lora_rank, groups.stop(v4.o_groups) * v4.o_lora_rank});
  wo_b_ = loader.LoadLinearCols(prefix + "wo_b.weight", Shape{hidden, v4.o_groups * v4.o_lora_rank},
                                {groups.begin * v4.o_lora_rank, groups.stop(v4.o_groups) * v4.o_lora_rank});
  sinks_ = loader.Load(prefix + "attn_sink", Shape{c.num_attention_heads}, heads);
  // The per-head norm has no weight: ones.
  Buffer ones = MakeF32Buffer(Shape{d}, std::vector<float>(static_cast<std::size_t>(d), 1.0f));
  head_norm_ = Buffer(DType::kF32, Shape{d}, loader.backend().allocator());
  loader.backend().CopyFromHost(ones.ptr<float>(), head_norm_);
  const RopeTables& rope = kind_ == io::V4Attention::kSliding ? main_rope : compress_rope;
  FISSION_CHECK(rope.attention_scaling == 1.0f, "DeepSeek-V4's rope does not scale cos and sin");
  inv_freq_ = UploadInvFreq(rope, loader.backend());
  if (kind_ != io::V4Attention::kSliding)
    compressor_ = std::make_unique<V4Compressor>(c, prefix + "compressor.", d, ratio_,
                                                 /*overlap=*/kind_ == io::V4Attention::kCsa, loader, compress_rope);
  if (kind_ == io::V4Attention::kCsa)
    indexer_ = std::make_unique<V4Indexer>(c, prefix + "indexer.", ratio_, loader, compress_rope, index_keys);
}

std::vector<std::int64_t> V4Attention::state_rings() const {
  std::vector<std::int64_t> rings;
  if (compressor_) rings.push_back(compressor_->state_positions());
  if (indexer_) rings.push_back(indexer_->state_positions());
  return rings;
}

void V4Attention::Forward(const StepContext& step, const Tensor& x, const V4StepPlan& plan,
                          const V4LayerMemory& memory, const Tensor& out) const {
  kernels::Backend& b = *step.backend;
  Allocator* alloc = b.allocator();
  const StepView& in = *step.in;
  const io::V4Config& v4 = *config_.v4;
  const std::int64_t n = x.shape[0], d = v4.head_dim, rope = config_.qk_rope_head_dim;

  Buffer q_latent(DType::kF32, Shape{n, config_.q_lora_rank}, alloc);
  b.Linear(x, wq_a_, q_latent);
  b.RmsNorm(q_latent, q_norm_, eps_, q_latent);
  Buffer q(DType::kF32, Shape{n, heads_, d}, alloc);
  b.Linear(q_latent, wq_b_, q.tensor().View(Shape{n, heads_ * d}));
  b.RmsNorm(q.tensor().View(Shape{n * heads_, d}), head_norm_, eps_, q.tensor().View(Shape{n * heads_, d}));
  b.v4().Rope(q, d - rope, rope, in.positions, inv_freq_, /*inverse=*/false);
  Buffer kv(DType::kF32, Shape{n, 1, d}, alloc);
  const Tensor kv_rows = kv.tensor().View(Shape{n, d});
  b.Linear(x, wkv_, kv_rows);
  b.RmsNorm(kv_rows, kv_norm_, eps_, kv_rows);
  b.v4().Rope(kv, d - rope, rope, in.positions, inv_freq_, /*inverse=*/false);
  // Attention sees the step's keys as the ring will hold them, so no chunking changes a result.
  if (format_ == kernels::V4KvFormat::kFp8) b.v4().RoundToStorage(kv_rows, rope);

  Buffer selection;
  if (compressor_) {
    const Buffer entries = compressor_->Pool(step, x, plan, memory.state);
    if (!entries.empty()) b.v4().WriteEntries(entries, plan.closed.at(ratio_).slots, memory.entries, format_, rope);
  }
  if (indexer_) {
    selection = Buffer(DType::kI32, Shape{n, config_.indexer->topk}, alloc);
    indexer_->Select(step, x, q_latent, plan, memory.index_state, memory.index_keys, selection);
  }
  kernels::V4AttentionShape shape;
  shape.heads = heads_;
  shape.head_dim = d;
  shape.window = v4.sliding_window;
  shape.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  shape.page_size = in.page_size;
  shape.ratio = ratio_;
  shape.kv_format = format_;
  shape.rope_dim = rope;
  // The keys of every token of the step (all-gathered over the CP group when split): every rank
  // attends its own queries to them and writes the full ring.
  Buffer kv_gathered;
  const Tensor kv_all = step.layout->KvRowsOfAllTokens(kv_rows, &kv_gathered);
  Buffer attn(DType::kF32, Shape{n, heads_, d}, alloc);
  b.Zero(attn);  // padding rows stay zero
  b.v4().Attention(q, kv_all, memory.window, memory.entries, selection.tensor(), sinks_, plan.queries, shape, attn);
  // After attention: the ring still held the old keys.
  b.v4().WriteEntries(kv_all, plan.ring(v4.sliding_window), memory.window, format_, rope);
  b.v4().Rope(attn, d - rope, rope, in.positions, inv_freq_, /*inverse=*/true);

  Buffer grouped(DType::kF32, Shape{n, groups_ * v4.o_lora_rank}, alloc);
  b.v4().GroupedLinear(attn.tensor().View(Shape{n, heads_ * d}), wo_a_, groups_, grouped);
  b.Linear(grouped, wo_b_, out);
  step.layout->ReduceAttentionOutput(out);
}

}  // namespace fission::model
