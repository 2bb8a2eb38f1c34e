#include "model/layers/mla_attention.h"

namespace fission::model {

// The q/kv LoRA norms use the module's default epsilon, not config.rms_norm_eps.
constexpr float kLoraNormEps = 1e-6f;

MlaAttention::MlaAttention(const io::ModelConfig& c, const std::string& prefix, WeightLoader& loader,
                           const RopeTables& rope, const RankInfo& rank, kernels::LatentFormat latent_format)
    : config_(c), rope_interleave_(c.rope_interleave), rope_scaling_(rope.attention_scaling) {
  shape_.latent_format = latent_format;
  const Range heads_range = EvenPart(c.num_attention_heads, rank.attn_tp_size(), rank.attn_tp_rank(),
                                     "num_attention_heads");
  const std::int64_t h0 = heads_range.begin, h1 = heads_range.end;
  shape_.num_heads = h1 - h0;
  shape_.qk_nope_head_dim = c.qk_nope_head_dim;
  shape_.qk_rope_head_dim = c.qk_rope_head_dim;
  shape_.v_head_dim = c.v_head_dim;
  shape_.kv_lora_rank = c.kv_lora_rank;
  shape_.softmax_scale = MlaSoftmaxScale(c);
  const std::int64_t heads = c.num_attention_heads, hidden = c.hidden_size;
  const Shape kv_a_shape{c.kv_lora_rank + c.qk_rope_head_dim, hidden};
  if (c.q_lora_rank > 0) {
    lora_down_proj_ = loader.LoadLinearStacked({{prefix + "q_a_proj.weight", Shape{c.q_lora_rank, hidden}},
                                                {prefix + "kv_a_proj_with_mqa.weight", kv_a_shape}});
    if (!lora_down_proj_) q_a_proj_ = loader.LoadLinear(prefix + "q_a_proj.weight", Shape{c.q_lora_rank, hidden});
    q_a_layernorm_ = loader.LoadNorm(prefix + "q_a_layernorm.weight", c.q_lora_rank);
    q_b_proj_ = loader.LoadLinear(prefix + "q_b_proj.weight", Shape{heads * c.qk_head_dim(), c.q_lora_rank},
                            {h0 * c.qk_head_dim(), h1 * c.qk_head_dim()});
  } else {
    q_proj_ = loader.LoadLinear(prefix + "q_proj.weight", Shape{heads * c.qk_head_dim(), hidden},
                          {h0 * c.qk_head_dim(), h1 * c.qk_head_dim()});
  }
  if (!lora_down_proj_) kv_a_proj_ = loader.LoadLinear(prefix + "kv_a_proj_with_mqa.weight", kv_a_shape);
  kv_a_layernorm_ = loader.LoadNorm(prefix + "kv_a_layernorm.weight", c.kv_lora_rank);
  const std::int64_t kv_b_rows = c.qk_nope_head_dim + c.v_head_dim;
  kv_b_proj_ = loader.Load(prefix + "kv_b_proj.weight", Shape{heads * kv_b_rows, c.kv_lora_rank},
                           {h0 * kv_b_rows, h1 * kv_b_rows});
  o_proj_ = loader.LoadLinearCols(prefix + "o_proj.weight", Shape{hidden, heads * c.v_head_dim},
                            {h0 * c.v_head_dim, h1 * c.v_head_dim});
  inv_freq_ = UploadInvFreq(rope, loader.backend());
}

void MlaAttention::Forward(const StepContext& step, const Tensor& x, const Tensor& cache, const Tensor& out) const {
  Latents latents = Project(step, x);
  const Buffer q = Query(*step.backend, x, latents);
  latents.q_latent = Buffer();  // not needed by attention: its memory is free again for it
  Attend(step, x, q, latents.kv_row, cache, Tensor{}, out);
}

std::vector<CacheField> MlaAttention::LatentFields(const io::ModelConfig& c, kernels::LatentFormat format,
                                                   DType exact_dtype) {
  if (format == kernels::LatentFormat::kExact) return {{"latent", exact_dtype, c.kv_lora_rank + c.qk_rope_head_dim}};
  return {{"latent_codes", DType::kF8E4M3, c.kv_lora_rank},
          {"latent_scales", DType::kF32, kernels::LatentScaleCount(c.kv_lora_rank)},
          {"rope", DType::kBF16, c.qk_rope_head_dim}};
}

MlaAttention::Latents MlaAttention::Project(const StepContext& step, const Tensor& x) const {
  kernels::Backend& b = *step.backend;
  const std::int64_t n = x.shape[0], q_lora = config_.q_lora_rank;
  Latents l;
  l.kv_row = Buffer(DType::kF32, Shape{n, 1, kv_row_width()}, b.allocator());
  if (q_lora > 0) l.q_latent = Buffer(DType::kF32, Shape{n, q_lora}, b.allocator());
  const std::span<const std::int32_t> positions = step.in->positions;
  if (lora_down_proj_) {
    Buffer joint(DType::kF32, Shape{n, q_lora + kv_row_width()}, b.allocator());
    b.Linear(x, *lora_down_proj_, joint);
    b.mla().SplitLatents(joint, q_a_layernorm_, kv_a_layernorm_, kLoraNormEps,
                         {positions, inv_freq_.tensor(), rope_scaling_, rope_interleave_}, l.q_latent, l.kv_row);
    return l;
  }
  if (q_lora > 0) {
    b.Linear(x, q_a_proj_, l.q_latent);
    b.RmsNorm(l.q_latent, q_a_layernorm_, kLoraNormEps, l.q_latent);
  }
  b.Linear(x, kv_a_proj_, l.kv_row.tensor().View(Shape{n, kv_row_width()}));
  b.RmsNorm(l.kv_row, kv_a_layernorm_, kLoraNormEps, l.kv_row);
  b.Rope(l.kv_row, shape_.kv_lora_rank, shape_.qk_rope_head_dim, positions, inv_freq_, rope_scaling_,
         rope_interleave_);
  return l;
}

Buffer MlaAttention::Query(kernels::Backend& b, const Tensor& x, const Latents& latents) const {
  const std::int64_t n = x.shape[0], qk = shape_.qk_nope_head_dim + shape_.qk_rope_head_dim;
  Buffer q(DType::kF32, Shape{n, shape_.num_heads, qk}, b.allocator());
  const Tensor flat = q.tensor().View(Shape{n, shape_.num_heads * qk});
  if (config_.q_lora_rank > 0) {
    b.Linear(latents.q_latent, q_b_proj_, flat);
  } else {
    b.Linear(x, q_proj_, flat);
  }
  return q;
}

void MlaAttention::ForwardSparse(const StepContext& step, const Tensor& x, const Latents& latents,
                                 const Tensor& cache, const Tensor& topk, const Tensor& out) const {
  FISSION_CHECK(config_.q_lora_rank > 0, "sparse MLA of an attention without a query LoRA");
  Attend(step, x, Query(*step.backend, x, latents), latents.kv_row, cache, topk, out);
}

void MlaAttention::Attend(const StepContext& step, const Tensor& x, const Tensor& q, const Tensor& kv_row,
                          const Tensor& cache, const Tensor& topk, const Tensor& out) const {
  kernels::Backend& b = *step.backend;
  Allocator* alloc = b.allocator();
  const StepView& in = *step.in;
  const std::int64_t n = x.shape[0], heads = shape_.num_heads;
  b.Rope(q, shape_.qk_nope_head_dim, shape_.qk_rope_head_dim, in.positions, inv_freq_, rope_scaling_,
         rope_interleave_);

  // Every rank writes the latent rows of every token of the step.
  kernels::MlaShape shape = shape_;
  shape.page_size = in.page_size;
  Buffer gathered;
  b.mla().WriteLatent(step.layout->KvRowsOfAllTokens(kv_row, &gathered), in.kv_slots, cache, shape);

  // Prefill chunks take the expanded form, single-token decodes the absorbed one (unless forced).
  std::span<const kernels::SeqAttention> expanded = in.prefill_seqs, absorbed = in.decode_seqs;
  if (step.mla_form == MlaForm::kExpanded) {
    expanded = in.seqs;
    absorbed = {};
  } else if (step.mla_form == MlaForm::kAbsorbed) {
    expanded = {};
    absorbed = in.seqs;
  }
  Buffer attn(DType::kF32, Shape{n, heads, shape_.v_head_dim}, alloc);
  b.Zero(attn);  // padding rows stay zero
  if (topk.data != nullptr) {
    if (!expanded.empty()) b.dsa().SparseMla(q, cache, kv_b_proj_, topk, expanded, shape, false, attn);
    if (!absorbed.empty()) b.dsa().SparseMla(q, cache, kv_b_proj_, topk, absorbed, shape, true, attn);
  } else {
    if (!expanded.empty()) b.mla().Expanded(q, cache, kv_b_proj_, expanded, shape, attn);
    if (!absorbed.empty()) b.mla().Absorbed(q, cache, kv_b_proj_, absorbed, shape, attn);
  }
  b.Linear(attn.tensor().View(Shape{n, heads * shape_.v_head_dim}), o_proj_, out);
  step.layout->ReduceAttentionOutput(out);
}

}  // namespace fission::model
