// The layer DeepSeek-V3 and the DSA families share: pre-norm attention and a pre-norm
// feed-forward (dense MLP or DeepSeekMoE), each added to the residual stream. The family decides
// how the attention runs (dense MLA, or MLA over the indexer's selection).
#pragma once

#include <functional>
#include <memory>

#include "model/layers/feed_forward.h"
#include "model/layers/mla_attention.h"

namespace fission::model {

struct DeepseekLayer {
  // Loads decoder layer `layer` ("model.layers.N.": the norms, self_attn.* and mlp.*), whose
  // feed-forward the config chooses (io::ModelConfig::IsMoeLayer).
  DeepseekLayer(const io::ModelConfig& config, std::int64_t layer, WeightLoader& loader, const RopeTables& rope,
                const RankInfo& rank, kernels::LatentFormat latent_format);
  // Loads the layer under `prefix` with DeepSeekMoE (`moe`) or a dense MLP (a NextN layer's
  // decoder, which is MoE whatever its index).
  DeepseekLayer(const io::ModelConfig& config, std::string prefix, bool moe, WeightLoader& loader,
                const RopeTables& rope, const RankInfo& rank, kernels::LatentFormat latent_format);
  // h += attend(input_layernorm(h)); y = feed_forward(post_attention_layernorm(h)). `attend(x, y)`
  // writes the attention output of x into y; x and y are [rows, hidden] scratch the caller shares.
  // The feed-forward's output is left in y, not yet added to h: the next layer adds it inside its
  // first norm (`residual_in_y`: h += y, then the norm, one AddRmsNorm instead of an Add and a
  // RmsNorm, the same bits), and after the last layer the caller adds it.
  using Attend = std::function<void(const Tensor& x, const Tensor& y)>;
  void Forward(const StepContext& step, const Tensor& h, const Tensor& x, const Tensor& y, const Attend& attend,
               bool residual_in_y) const;

  std::string prefix;
  float norm_eps;
  Buffer input_layernorm, post_attention_layernorm;
  std::unique_ptr<MlaAttention> attention;
  std::unique_ptr<DeepseekFeedForward> feed_forward;
};

// The paged class of MLA's latent rows: one entry per token in each of `layers` layers.
CacheClass MlaLatentClass(const io::ModelConfig& config, kernels::LatentFormat format, DType exact_dtype,
                          std::int32_t layers);

}  // namespace fission::model
