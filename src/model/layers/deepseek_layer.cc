#include "model/layers/deepseek_layer.h"

namespace fission::model {

DeepseekLayer::DeepseekLayer(const io::ModelConfig& c, std::int64_t layer, WeightLoader& loader,
                             const RopeTables& rope, const RankInfo& rank, kernels::LatentFormat latent_format)
    : DeepseekLayer(c, StrCat("model.layers.", layer, "."), c.IsMoeLayer(layer), loader, rope, rank, latent_format) {}

DeepseekLayer::DeepseekLayer(const io::ModelConfig& c, std::string layer_prefix, bool moe, WeightLoader& loader,
                             const RopeTables& rope, const RankInfo& rank, kernels::LatentFormat latent_format)
    : prefix(std::move(layer_prefix)), norm_eps(static_cast<float>(c.rms_norm_eps)) {
  input_layernorm = loader.LoadNorm(prefix + "input_layernorm.weight", c.hidden_size);
  post_attention_layernorm = loader.LoadNorm(prefix + "post_attention_layernorm.weight", c.hidden_size);
  attention = std::make_unique<MlaAttention>(c, prefix + "self_attn.", loader, rope, rank, latent_format);
  feed_forward = std::make_unique<DeepseekFeedForward>(c, moe, prefix + "mlp.", loader, rank);
}

void DeepseekLayer::Forward(const StepContext& step, const Tensor& h, const Tensor& x, const Tensor& y,
                            const Attend& attend, bool residual_in_y) const {
  kernels::Backend& b = *step.backend;
  if (residual_in_y) {
    b.AddRmsNorm(h, y, input_layernorm, norm_eps, x);
  } else {
    b.RmsNorm(h, input_layernorm, norm_eps, x);
  }
  attend(x, y);
  b.AddRmsNorm(h, y, post_attention_layernorm, norm_eps, x);
  feed_forward->Run(step, x, y);
}

CacheClass MlaLatentClass(const io::ModelConfig& config, kernels::LatentFormat format, DType exact_dtype,
                          std::int32_t layers) {
  CacheClass latent;
  latent.name = "mla_latent";
  latent.kind = CacheKind::kPaged;
  latent.tokens_per_entry = 1;
  latent.layers = layers;
  latent.fields = MlaAttention::LatentFields(config, format, exact_dtype);
  return latent;
}

}  // namespace fission::model
