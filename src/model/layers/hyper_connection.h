// DeepSeek-V4's manifold-constrained hyper-connections (mHC): the residual is `hc_mult` streams
// per token. Before each sublayer (attention, MoE) the streams collapse into the sublayer's input;
// after it the output is spread back over the streams and added to a doubly stochastic mix of
// them. A final head collapses the streams before the model's norm. Replicated on every rank.
#pragma once

#include <string>

#include "io/model_config.h"
#include "model/weights.h"

namespace fission::model {

kernels::HyperShape HyperShapeOf(const io::ModelConfig& config);

class HyperConnection {
 public:
  // `prefix` names the sublayer's three tensors: `prefix`fn, `prefix`base, `prefix`scale
  // ("layers.N.hc_attn_", "layers.N.hc_ffn_").
  HyperConnection(const io::ModelConfig& config, const std::string& prefix, WeightLoader& loader);
  // collapsed [n, hidden] = the sublayer's input; post, comb: what After needs.
  void Before(kernels::Backend& b, const Tensor& streams, const Tensor& collapsed, const Tensor& post,
              const Tensor& comb) const;
  // out = post · sublayer_out + combᵀ · streams: the next streams (`out` must not alias `streams`;
  // the caller alternates two buffers).
  void After(kernels::Backend& b, const Tensor& sublayer_out, const Tensor& post, const Tensor& comb,
             const Tensor& streams, const Tensor& out) const;

 private:
  kernels::HyperShape shape_;
  Buffer fn_, base_, scale_;
};

class HyperHead {
 public:
  HyperHead(const io::ModelConfig& config, WeightLoader& loader);  // hc_head_fn, hc_head_base, hc_head_scale
  void Forward(kernels::Backend& b, const Tensor& streams, const Tensor& out) const;

 private:
  kernels::HyperShape shape_;
  Buffer fn_, base_, scale_;
};

}  // namespace fission::model
