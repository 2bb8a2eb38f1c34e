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
#include "model/layers/deepseek_layer.h"
#include "model/layers/lightning_indexer.h"

namespace fission::model {

class DeepseekSparseModel final : public DecoderModel {
 public:
  DeepseekSparseModel(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options);

  std::string architecture() const override;
  // Two paged classes: MLA's latent row per token and layer, and the indexer's key per token and
  // full layer.
  MemorySpec Memory() const override;

 private:
  Buffer Hidden(const StepContext& step) override;

  std::vector<DeepseekLayer> layers_;
  std::vector<std::unique_ptr<LightningIndexer>> indexers_;  // per layer; null in a shared layer
  std::vector<int> index_layer_;                             // per layer: its layer of the key cache
  int full_layers_ = 0;
};

}  // namespace fission::model
