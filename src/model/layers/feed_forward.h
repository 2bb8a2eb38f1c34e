// The two feed-forward kinds of DeepSeek-V3 layers: a dense SwiGLU MLP, and DeepSeekMoE
// (router + routed experts + shared experts).
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "model/step_context.h"
#include "model/weights.h"

namespace fission::model {

// Both kinds are tensor-parallel over the whole world: a rank holds a slice of the intermediate
// units (gate/up rows, down columns) and Forward returns its partial sum; the caller all-reduces.
class SwiGluMlp {
 public:
  // Loads slice `part` (of `intermediate` units) of `prefix`gate_proj/up_proj/down_proj.
  SwiGluMlp(const std::string& prefix, std::int64_t hidden, std::int64_t intermediate, Range part,
            WeightLoader& loader);
  void Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const;

 private:
  std::int64_t intermediate_;
  Weight gate_up_;  // [2I, H]: gate rows, then up rows
  Weight down_;     // [H, I]
};

// Tensor-parallel (every rank holds a slice of every expert; Forward is its partial sum) or, with
// --ep-size > 1, expert-parallel: a rank holds its EP rank's experts (sliced over that EP rank's
// moe_tp ranks) and the shared experts whole, and Run dispatches tokens through the token layout.
class DeepseekMoe {
 public:
  DeepseekMoe(const io::ModelConfig& config, const std::string& prefix, WeightLoader& loader, const RankInfo& rank);
  // Tensor-parallel: this rank's partial sum for x.
  void Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const;
  bool expert_parallel() const { return expert_parallel_; }
  // Expert-parallel: out = the MoE of this rank's rows x (TokenLayout::ExpertParallel).
  void RunExpertParallel(const StepContext& step, const Tensor& x, const Tensor& out) const;
  int top_k() const { return routing_.top_k; }

 private:
  void Route(kernels::Backend& b, const Tensor& x, const Tensor& ids, const Tensor& weights) const;
  // Loads the shared experts as pieces behind the routed ones (see feed_forward.cc); false, with
  // nothing kept, when a piece does not load in the routed experts' format.
  bool LoadSharedAsExperts(const io::ModelConfig& c, const std::string& prefix, Range part, WeightLoader& loader);
  bool expert_parallel_ = false;
  kernels::MoeRouting routing_;
  Buffer router_;  // [E, H]
  Buffer bias_;    // [E] e_score_correction_bias
  // Routed experts, all of one format (the experts operation takes one), then the shared experts'
  // pieces when they run with them (routing_.shared_experts of them).
  std::vector<Weight> gate_up_, down_;
  std::vector<WeightView> gate_up_views_, down_views_;
  std::unique_ptr<SwiGluMlp> shared_;  // the shared experts as a dense MLP beside the routed ones
};

// The feed-forward of a DeepSeek-family layer: DeepSeekMoE (`moe`) or the dense MLP, under `prefix`
// ("model.layers.N.mlp.").
class DeepseekFeedForward {
 public:
  DeepseekFeedForward(const io::ModelConfig& config, bool moe, const std::string& prefix,
                      WeightLoader& loader, const RankInfo& rank);
  // out = the feed-forward of this rank's rows x, through the token layout's transitions.
  void Run(const StepContext& step, const Tensor& x, const Tensor& out) const;

 private:
  std::unique_ptr<SwiGluMlp> mlp_;
  std::unique_ptr<DeepseekMoe> moe_;
};

}  // namespace fission::model
