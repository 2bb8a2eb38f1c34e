// DeepSeek-V3 (also R1 and Kimi-K2): embedding, layers of MLA attention and a dense MLP or
// DeepSeekMoE, final norm and lm_head — assembled only from backend operations.
#pragma once

#include <memory>
#include <vector>

#include "io/model_config.h"
#include "model/causal_lm.h"
#include "model/feed_forward.h"
#include "model/layer_context.h"
#include "model/mla_attention.h"

namespace fission::model {

class DeepseekV3Model final : public CausalLM {
 public:
  DeepseekV3Model(io::ModelConfig config, WeightLoader& loader, MlaForm mla_form);

  std::string architecture() const override { return "DeepseekV3ForCausalLM"; }
  std::int64_t vocab_size() const override { return config_.vocab_size; }
  std::int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
  std::vector<KvLayerLayout> KvLayout() const override;
  Buffer Forward(const ForwardBatch& batch, KvCache& cache) override;
  const io::ModelConfig& config() const { return config_; }

 private:
  struct Layer {
    Buffer input_layernorm, post_attention_layernorm;
    std::unique_ptr<MlaAttention> attention;
    std::unique_ptr<SwiGluMlp> mlp;
    std::unique_ptr<DeepseekMoe> moe;
  };

  io::ModelConfig config_;
  kernels::Backend& backend_;
  MlaForm mla_form_;
  Buffer embed_tokens_, norm_, lm_head_;
  std::vector<Layer> layers_;
};

}  // namespace fission::model
