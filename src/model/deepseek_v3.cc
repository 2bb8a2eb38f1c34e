#include "model/deepseek_v3.h"

namespace fission::model {

DeepseekV3Model::DeepseekV3Model(io::ModelConfig config, WeightLoader& loader, MlaForm mla_form)
    : config_(std::move(config)), backend_(loader.backend()), mla_form_(mla_form) {
  const io::ModelConfig& c = config_;
  embed_tokens_ = loader.Load("model.embed_tokens.weight", Shape{c.vocab_size, c.hidden_size});
  const RopeTables rope = ComputeRope(c);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string prefix = StrCat("model.layers.", i, ".");
    Layer layer;
    layer.input_layernorm = loader.LoadNorm(prefix + "input_layernorm.weight", c.hidden_size);
    layer.post_attention_layernorm = loader.LoadNorm(prefix + "post_attention_layernorm.weight", c.hidden_size);
    layer.attention = std::make_unique<MlaAttention>(c, prefix + "self_attn.", loader, rope);
    if (c.IsMoeLayer(i)) {
      layer.moe = std::make_unique<DeepseekMoe>(c, prefix + "mlp.", loader);
    } else {
      layer.mlp = std::make_unique<SwiGluMlp>(prefix + "mlp.", c.hidden_size, c.intermediate_size, loader);
    }
    layers_.push_back(std::move(layer));
  }
  norm_ = loader.LoadNorm("model.norm.weight", c.hidden_size);
  lm_head_ = loader.Load(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                         Shape{c.vocab_size, c.hidden_size});
}

std::vector<KvLayerLayout> DeepseekV3Model::KvLayout() const {
  return std::vector<KvLayerLayout>(layers_.size(),
                                    KvLayerLayout{config_.kv_lora_rank + config_.qk_rope_head_dim, DType::kF32});
}

Buffer DeepseekV3Model::Forward(const ForwardBatch& batch, KvCache& cache) {
  kernels::Backend& b = backend_;
  Allocator* alloc = b.allocator();
  const std::int64_t n = batch.num_tokens(), hidden = config_.hidden_size;
  FISSION_CHECK(static_cast<std::int64_t>(batch.positions.size()) == n &&
                static_cast<std::int64_t>(batch.kv_slots.size()) == n);
  for (std::int32_t id : batch.token_ids)
    FISSION_CHECK(id >= 0 && id < config_.vocab_size, "token id ", id, " outside vocabulary ", config_.vocab_size);

  StepContext step;
  step.backend = &b;
  step.positions = batch.positions;
  step.kv_slots = batch.kv_slots;
  step.page_size = cache.page_size();
  step.mla_form = mla_form_;
  for (const SequenceSlice& s : batch.sequences)
    step.seqs.push_back({s.query_start, s.query_len, s.context_len, s.block_table});

  Buffer h(DType::kF32, Shape{n, hidden}, alloc), x(DType::kF32, Shape{n, hidden}, alloc),
      y(DType::kF32, Shape{n, hidden}, alloc);
  b.Embedding(embed_tokens_, batch.token_ids, h);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    b.RmsNorm(h, layer.input_layernorm, static_cast<float>(config_.rms_norm_eps), x);
    layer.attention->Forward(step, x, cache.layer(static_cast<int>(i)), y);
    b.Add(h, y, h);
    b.RmsNorm(h, layer.post_attention_layernorm, static_cast<float>(config_.rms_norm_eps), x);
    if (layer.moe) {
      layer.moe->Forward(b, x, y);
    } else {
      layer.mlp->Forward(b, x, y);
    }
    b.Add(h, y, h);
  }
  // Only the rows that need logits go through the final norm and lm_head.
  const std::int64_t m = static_cast<std::int64_t>(batch.logits_indices.size());
  Buffer selected(DType::kF32, Shape{m, hidden}, alloc);
  b.GatherRows(h, batch.logits_indices, selected);
  b.RmsNorm(selected, norm_, static_cast<float>(config_.rms_norm_eps), selected);
  Buffer logits(DType::kF32, Shape{m, config_.vocab_size}, alloc);
  b.Linear(selected, lm_head_, logits);
  if (b.device().type == DeviceType::kCpu) return logits;
  Buffer host(DType::kF32, logits.tensor().shape);
  b.CopyToHost(logits, host.ptr<float>());
  return host;
}

}  // namespace fission::model
