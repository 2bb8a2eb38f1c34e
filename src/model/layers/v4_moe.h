// DeepSeek-V4's MoE: sqrt(softplus) router scores; the experts of a token are the top-k of score +
// bias, or in the first hash-routed layers a fixed table of the token id (tid2eid); weights are
// the chosen scores normalised, times routed_scaling_factor. Routed and shared experts are
// SwiGLU with the gate clamped above and the up projection both ways at swiglu_limit.
//
// Tensor parallelism as DeepSeekMoE: each rank holds a slice of every expert's intermediate units
// and returns its partial sum; the router and the hash table are replicated.
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "model/step_context.h"
#include "model/weights.h"

namespace fission::model {

class V4Moe {
 public:
  // Loads "layers.N.ffn.": gate.weight, gate.bias or gate.tid2eid, experts.E.w1/w2/w3 and
  // shared_experts.w1/w2/w3.
  V4Moe(const io::ModelConfig& config, std::int64_t layer, WeightLoader& loader, const RankInfo& rank);
  // out [rows, hidden] = this rank's partial sum for x, whose rows are the step's tokens
  // (`token_ids`, for the hash-routed layers).
  void Forward(kernels::Backend& b, const Tensor& x, std::span<const std::int32_t> token_ids, const Tensor& out) const;

 private:
  std::int64_t experts_, top_k_, shared_inter_;
  float scaling_, limit_;
  Buffer router_, bias_;
  Buffer tid2eid_;  // [vocab, top_k] I32 on the backend; empty in a score-routed layer
  std::vector<Weight> gate_up_, down_;
  std::vector<WeightView> gate_up_views_, down_views_;
  Weight shared_gate_up_, shared_down_;
};

}  // namespace fission::model
