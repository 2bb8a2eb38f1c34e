// The two feed-forward kinds of DeepSeek-V3 layers: a dense SwiGLU MLP, and DeepSeekMoE
// (router + routed experts + shared experts).
#pragma once

#include <string>
#include <vector>

#include "io/model_config.h"
#include "model/layer_context.h"
#include "model/weights.h"

namespace fission::model {

class SwiGluMlp {
 public:
  // Loads `prefix`gate_proj/up_proj/down_proj with `intermediate` hidden units.
  SwiGluMlp(const std::string& prefix, std::int64_t hidden, std::int64_t intermediate, WeightLoader& loader);
  void Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const;

 private:
  std::int64_t intermediate_;
  Buffer gate_up_;  // [2I, H]: gate rows, then up rows
  Buffer down_;     // [H, I]
};

class DeepseekMoe {
 public:
  DeepseekMoe(const io::ModelConfig& config, const std::string& prefix, WeightLoader& loader);
  void Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const;

 private:
  kernels::MoeRouting routing_;
  Buffer router_;  // [E, H]
  Buffer bias_;    // [E] e_score_correction_bias
  std::vector<Buffer> gate_up_, down_;
  std::vector<Tensor> gate_up_views_, down_views_;
  std::unique_ptr<SwiGluMlp> shared_;
};

}  // namespace fission::model
