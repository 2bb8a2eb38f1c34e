// Rotary embedding tables as DeepSeek applies them: YaRN-scaled inverse frequencies, the factor
// that scales cos and sin, and the softmax scale with YaRN's mscale folded in.
#pragma once

#include <vector>

#include "io/model_config.h"
#include "kernels/backend.h"

namespace fission::model {

struct RopeTables {
  std::vector<float> inv_freq;  // qk_rope_head_dim / 2 values
  float attention_scaling = 1.0f;  // multiplies cos and sin
};

RopeTables ComputeRope(const io::ModelConfig& config);
// The tables of one rope setting over `dim` rotated dims (DeepSeek-V4 has two settings).
RopeTables ComputeRope(const io::RopeConfig& rope, std::int64_t dim);
// The inverse frequencies in the backend's memory, as Backend::Rope takes them.
Buffer UploadInvFreq(const RopeTables& rope, kernels::Backend& backend);
// qk_head_dim^-0.5, times mscale² when YaRN has mscale_all_dim.
float MlaSoftmaxScale(const io::ModelConfig& config);

}  // namespace fission::model
