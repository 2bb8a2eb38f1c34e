// DeepSeek Sparse Attention models: DeepSeek-V3.2 (deepseek_v32) and GLM-5.x (glm_moe_dsa).
// Each layer is a DeepSeek-V3 layer whose MLA attends only the keys its lightning indexer selects
// (model/layers/lightning_indexer.h). GLM-5.2's IndexShare makes some layers "shared": they have
// no indexer and reuse the selection of the latest full layer. The families differ only in
// config values (dims, rope, routing groups, the indexer's rope layout), which io::ModelConfig
// carries.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/layers/feed_forward.h"
#include "model/layers/lightning_indexer.h"
#include "model/layers/mla_attention.h"

namespace fission::model {

class DeepseekSparseModel final : public DecoderModel {
 public:
  DeepseekSparseModel(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options);

  std::string architecture() const override;
  // Two paged classes: MLA's latent row per token and layer, and the indexer's key per token and
  // full layer.
  MemorySpec Memory() const override;

 private:
  struct Layer {
    Buffer input_layernorm, post_attention_layernorm;
    std::unique_ptr<MlaAttention> attention;
    std::unique_ptr<LightningIndexer> indexer;  // null in a shared layer
    int index_layer = -1;                       // its layer of the key cache (full layers)
    std::unique_ptr<DeepseekFeedForward> feed_forward;
  };
  Buffer Hidden(const StepContext& step) override;

  std::vector<Layer> layers_;
  int full_layers_ = 0;
};

}  // namespace fission::model
