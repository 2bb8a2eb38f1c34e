// DeepSeek-V4 (deepseek_v4: V4-Flash, V4-Pro). Every layer keeps hc_mult residual streams mixed by
// hyper-connections around its attention and its MoE (model/layers/hyper_connection.h). Attention
// reads a sliding window of keys and, in CSA and HCA layers, entries compressed from windows of
// positions (model/layers/v4_attention.h); the MoE is sqrt-softplus or hash routed
// (model/layers/v4_moe.h). Checkpoints use DeepSeek's names (embed, head, norm, hc_head_*,
// layers.N.{attn,ffn,attn_norm,ffn_norm,hc_attn_*,hc_ffn_*}).
//
// Prefill context parallelism as ATOM does it for V4: every projection, the indexer's queries and
// attention run on the rank's own rows; the window keys and the compressors' projections are
// all-gathered, so every rank writes the full ring, entries and carry-over.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/layers/hyper_connection.h"
#include "model/layers/v4_attention.h"
#include "model/layers/v4_moe.h"
#include "model/layers/v4_step_plan.h"

namespace fission::model {

// The model's memory from its config alone (for `fission model inspect` too): per layer a
// sliding-window ring (per request); per CSA layer paged entries and index keys at 1/ratio of the
// tokens and two compressor carry-overs (per request); per HCA layer paged entries and one
// carry-over. Keys and entries are stored in `format` (exact: `kv_dtype`).
MemorySpec V4MemorySpec(const io::ModelConfig& config, kernels::V4KvFormat format, kernels::IndexKeyFormat index_keys,
                        DType kv_dtype);

class DeepseekV4Model final : public DecoderModel {
 public:
  DeepseekV4Model(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options);

  std::string architecture() const override { return "DeepseekV4ForCausalLM"; }
  MemorySpec Memory() const override;  // V4MemorySpec

 private:
  struct Layer {
    Buffer attn_norm, ffn_norm;
    std::unique_ptr<HyperConnection> attn_hc, ffn_hc;
    std::unique_ptr<V4Attention> attention;
    std::unique_ptr<V4Moe> moe;
    int csa = -1, hca = -1;  // the layer's index among the CSA (HCA) layers
  };

  Buffer Hidden(const StepContext& step) override;
  V4LayerMemory LayerMemory(const ModelMemory& memory, const Layer& layer, std::size_t index) const;

  std::vector<Layer> layers_;
  std::unique_ptr<HyperHead> head_;
  int csa_layers_ = 0, hca_layers_ = 0;
  const V4StepPlanner* planner_ = nullptr;  // the step plan in the input block (owned by DecoderModel)
};

}  // namespace fission::model
