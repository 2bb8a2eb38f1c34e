#include "model/arch/deepseek_v32.h"

namespace fission::model {

DeepseekSparseModel::DeepseekSparseModel(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options)
    : DecoderModel(std::move(config), loader.backend(), options) {
  const io::ModelConfig& c = this->config();
  const RankInfo& rank = options.rank;
  Buffer embed = loader.Load("model.embed_tokens.weight", Shape{c.vocab_size, c.hidden_size}, vocab_part());
  const RopeTables rope = ComputeRope(c);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string prefix = StrCat("model.layers.", i, ".");
    Layer layer;
    layer.input_layernorm = loader.LoadNorm(prefix + "input_layernorm.weight", c.hidden_size);
    layer.post_attention_layernorm = loader.LoadNorm(prefix + "post_attention_layernorm.weight", c.hidden_size);
    layer.attention = std::make_unique<MlaAttention>(c, prefix + "self_attn.", loader, rope, rank,
                                                     options.latent_format);
    if (c.indexer->full_layers[static_cast<std::size_t>(i)]) {
      layer.indexer =
          std::make_unique<LightningIndexer>(c, prefix + "self_attn.indexer.", loader, rope, options.index_keys);
      layer.index_layer = full_layers_++;
    }
    layer.feed_forward = std::make_unique<DeepseekFeedForward>(c, i, prefix + "mlp.", loader, rank);
    layers_.push_back(std::move(layer));
  }
  Buffer norm = loader.LoadNorm("model.norm.weight", c.hidden_size);
  Buffer lm_head = loader.Load(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                               Shape{c.vocab_size, c.hidden_size}, vocab_part());
  SetVocabulary(std::move(embed), std::move(norm), static_cast<float>(c.rms_norm_eps), Weight::Plain(std::move(lm_head)));
}

std::string DeepseekSparseModel::architecture() const {
  return config().model_type == "glm_moe_dsa" ? "GlmMoeDsaForCausalLM" : "DeepseekV32ForCausalLM";
}

MemorySpec DeepseekSparseModel::Memory() const {
  const io::ModelConfig& c = config();
  CacheClass latent;
  latent.name = "mla_latent";
  latent.kind = CacheKind::kPaged;
  latent.tokens_per_entry = 1;
  latent.layers = static_cast<std::int32_t>(layers_.size());
  latent.fields = MlaAttention::LatentFields(c, options().latent_format, options().kv_dtype);
  CacheClass keys;
  keys.name = "dsa_index_key";
  keys.kind = CacheKind::kPaged;
  keys.tokens_per_entry = 1;
  keys.layers = full_layers_;
  keys.fields = LightningIndexer::KeyFields(c, options().index_keys, options().kv_dtype);
  return {{latent, keys}};
}

Buffer DeepseekSparseModel::Hidden(const StepContext& step) {
  kernels::Backend& b = *step.backend;
  Allocator* alloc = b.allocator();
  const std::int64_t n = step.layout->rows(), hidden = config().hidden_size;
  Buffer h(DType::kF32, Shape{n, hidden}, alloc), x(DType::kF32, Shape{n, hidden}, alloc),
      y(DType::kF32, Shape{n, hidden}, alloc);
  // The selection of the latest full layer; shared layers reuse it.
  Buffer topk(DType::kI32, Shape{n, config().indexer->topk}, alloc);
  Embed(step, h);
  const float eps = static_cast<float>(config().rms_norm_eps);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    b.RmsNorm(h, layer.input_layernorm, eps, x);
    const Buffer q_latent = layer.attention->QueryLatent(b, x);
    if (layer.indexer) layer.indexer->Select(step, x, q_latent, step.memory->entries(1, layer.index_layer), topk);
    layer.attention->ForwardSparse(step, x, q_latent, step.memory->entries(0, static_cast<int>(i)), topk, y);
    b.Add(h, y, h);
    b.RmsNorm(h, layer.post_attention_layernorm, eps, x);
    step.layout->FeedForward(x, y, [&](const Tensor& in, const Tensor& partial) {
      layer.feed_forward->Forward(b, in, partial);
    });
    b.Add(h, y, h);
  }
  return h;
}

}  // namespace fission::model
