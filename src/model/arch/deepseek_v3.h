// DeepSeek-V3 (also R1 and Kimi-K2): layers of MLA attention and a dense MLP or DeepSeekMoE
// between the shared embedding and lm_head (model/decoder.h). One instance is one rank's shard:
// attention heads, vocabulary rows and feed-forward units are split as docs/architecture.md
// describes; a single rank holds everything.
#pragma once

#include <vector>

#include "model/decoder.h"
#include "model/layers/deepseek_layer.h"
#include "model/layers/nextn_layer.h"

namespace fission::model {

class DeepseekV3Model final : public DecoderModel {
 public:
  DeepseekV3Model(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options);

  std::string architecture() const override { return "DeepseekV3ForCausalLM"; }
  // One paged class: the MLA latent row of every token in every layer (and the NextN layer's, when
  // the draft is loaded).
  MemorySpec Memory() const override;

 private:
  Buffer Hidden(const StepContext& step) override;
  // The NextN layer (options().draft_layer) from the draft checkpoint, or from the target's.
  void LoadDraft(WeightLoader& loader, const RopeTables& rope);

  std::vector<DeepseekLayer> layers_;
};

}  // namespace fission::model
