#include "model/arch/deepseek_v32.h"

namespace fission::model {

DeepseekSparseModel::DeepseekSparseModel(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options)
    : DecoderModel(std::move(config), loader.backend(), options) {
  const io::ModelConfig& c = this->config();
  Buffer embed = LoadDeepseekEmbedding(loader);
  const RopeTables rope = ComputeRope(c);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const DeepseekLayer& layer = layers_.emplace_back(c, i, loader, rope, options.rank, options.latent_format);
    const bool full = c.indexer->full_layers[static_cast<std::size_t>(i)];
    indexers_.push_back(full ? std::make_unique<LightningIndexer>(c, layer.prefix + "self_attn.indexer.", loader,
                                                                  rope, options.index_keys)
                             : nullptr);
    index_layer_.push_back(full ? full_layers_++ : -1);
  }
  LoadDeepseekHead(loader, std::move(embed));
}

std::string DeepseekSparseModel::architecture() const {
  return config().model_type == "glm_moe_dsa" ? "GlmMoeDsaForCausalLM" : "DeepseekV32ForCausalLM";
}

MemorySpec DeepseekSparseModel::Memory() const {
  CacheClass keys;
  keys.name = "dsa_index_key";
  keys.kind = CacheKind::kPaged;
  keys.tokens_per_entry = 1;
  keys.layers = full_layers_;
  keys.fields = LightningIndexer::KeyFields(config(), options().index_keys, options().kv_dtype);
  return {{MlaLatentClass(config(), options().latent_format, options().kv_dtype,
                          static_cast<std::int32_t>(layers_.size())),
           keys}};
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
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const DeepseekLayer& layer = layers_[i];
    const auto attend = [&](const Tensor& in, const Tensor& out) {
      const MlaAttention::Latents latents = layer.attention->Project(step, in);
      if (indexers_[i])
        indexers_[i]->Select(step, in, latents.q_latent, step.memory->entries(1, index_layer_[i]), topk);
      layer.attention->ForwardSparse(step, in, latents, step.memory->entries(0, static_cast<int>(i)), topk, out);
    };
    layer.Forward(step, h, x, y, attend, /*residual_in_y=*/i > 0);
  }
  if (!layers_.empty()) b.Add(h, y, h);  // the last layer's feed-forward
  return h;
}

}  // namespace fission::model
