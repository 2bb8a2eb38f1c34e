#include "model/layers/hyper_connection.h"

namespace fission::model {

kernels::HyperShape HyperShapeOf(const io::ModelConfig& c) {
  kernels::HyperShape shape;
  shape.mult = c.v4->hc_mult;
  shape.hidden = c.hidden_size;
  shape.sinkhorn_iters = c.v4->hc_sinkhorn_iters;
  shape.eps = static_cast<float>(c.v4->hc_eps);
  shape.norm_eps = static_cast<float>(c.rms_norm_eps);
  return shape;
}

HyperConnection::HyperConnection(const io::ModelConfig& c, const std::string& prefix, WeightLoader& loader)
    : shape_(HyperShapeOf(c)) {
  const std::int64_t m = shape_.mult, mixes = (2 + m) * m;
  // The mixing weights stay fp32 whatever the matrix dtype, as the checkpoints store them.
  fn_ = loader.LoadF32(prefix + "fn", Shape{mixes, m * c.hidden_size});
  base_ = loader.LoadBias(prefix + "base", mixes);
  scale_ = loader.LoadNorm(prefix + "scale", 3);
}

void HyperConnection::Before(kernels::Backend& b, const Tensor& streams, const Tensor& collapsed, const Tensor& post,
                             const Tensor& comb) const {
  b.v4().HyperPre(streams, fn_, base_, scale_, shape_, collapsed, post, comb);
}

void HyperConnection::After(kernels::Backend& b, const Tensor& sublayer_out, const Tensor& post, const Tensor& comb,
                            const Tensor& streams, const Tensor& out) const {
  b.v4().HyperPost(sublayer_out, streams, post, comb, out);
}

HyperHead::HyperHead(const io::ModelConfig& c, WeightLoader& loader) : shape_(HyperShapeOf(c)) {
  fn_ = loader.LoadF32("hc_head_fn", Shape{shape_.mult, shape_.mult * c.hidden_size});
  base_ = loader.LoadBias("hc_head_base", shape_.mult);
  scale_ = loader.LoadNorm("hc_head_scale", 1);
}

void HyperHead::Forward(kernels::Backend& b, const Tensor& streams, const Tensor& out) const {
  b.v4().HyperHead(streams, fn_, base_, scale_, shape_, out);
}

}  // namespace fission::model
