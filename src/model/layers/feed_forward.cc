#include "model/layers/feed_forward.h"

namespace fission::model {

SwiGluMlp::SwiGluMlp(const std::string& prefix, std::int64_t hidden, std::int64_t intermediate, Range part,
                     WeightLoader& loader)
    : intermediate_(part.size(intermediate)) {
  gate_up_ = loader.LoadLinearStacked(prefix + "gate_proj.weight", prefix + "up_proj.weight", Shape{intermediate, hidden},
                                part);
  down_ = loader.LoadLinearCols(prefix + "down_proj.weight", Shape{hidden, intermediate}, part);
}

void SwiGluMlp::Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const {
  const std::int64_t n = x.shape[0];
  Buffer gu(DType::kF32, Shape{n, 2 * intermediate_}, b.allocator());
  Buffer act(DType::kF32, Shape{n, intermediate_}, b.allocator());
  b.Linear(x, gate_up_, gu);
  b.SiluMul(gu, act);
  b.Linear(act, down_, out);
}

DeepseekMoe::DeepseekMoe(const io::ModelConfig& c, const std::string& prefix, WeightLoader& loader,
                         const RankInfo& rank) {
  routing_.num_experts = c.n_routed_experts;
  routing_.top_k = c.num_experts_per_tok;
  routing_.n_group = c.n_group;
  routing_.topk_group = c.topk_group;
  routing_.norm_topk_prob = c.norm_topk_prob;
  routing_.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  router_ = loader.LoadF32(prefix + "gate.weight", Shape{c.n_routed_experts, c.hidden_size});
  if (loader.dummy()) {
    bias_ = loader.LoadNorm(prefix + "gate.e_score_correction_bias", c.n_routed_experts);
  } else {
    bias_ = loader.Load(prefix + "gate.e_score_correction_bias", Shape{c.n_routed_experts});
  }
  // Experts are kept as plain tensors so the backend can run them as one grouped operation; each
  // rank holds the same slice of every expert's intermediate units.
  const Range part = EvenPart(c.moe_intermediate_size, rank.world_size(), rank.world_rank(), "moe_intermediate_size");
  for (std::int64_t e = 0; e < c.n_routed_experts; ++e) {
    const std::string p = StrCat(prefix, "experts.", e, ".");
    gate_up_.push_back(loader.LoadLinearStacked(p + "gate_proj.weight", p + "up_proj.weight",
                                                Shape{c.moe_intermediate_size, c.hidden_size}, part));
    down_.push_back(loader.LoadLinearCols(p + "down_proj.weight", Shape{c.hidden_size, c.moe_intermediate_size}, part,
                                          /*allow_fp8=*/gate_up_.back().quantized()));
  }
  const WeightFormat format = gate_up_[0].format;
  for (std::size_t e = 0; e < gate_up_.size(); ++e) {
    if (!(gate_up_[e].format == format) || !(down_[e].format == format))
      Fail(prefix, "experts.", e, ": gate_up is ", gate_up_[e].format.Name(), " and down ", down_[e].format.Name(),
           " where expert 0's gate_up is ", format.Name(), "; the routed experts must all have one format");
    gate_up_views_.push_back(gate_up_[e].view());
    down_views_.push_back(down_[e].view());
  }
  if (c.n_shared_experts > 0) {
    const std::int64_t shared_inter = c.moe_intermediate_size * c.n_shared_experts;
    shared_ = std::make_unique<SwiGluMlp>(prefix + "shared_experts.", c.hidden_size, shared_inter,
                                          EvenPart(shared_inter, rank.world_size(), rank.world_rank(),
                                                   "shared experts' intermediate size"),
                                          loader);
  }
}

void DeepseekMoe::Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const {
  const std::int64_t n = x.shape[0];
  Buffer logits(DType::kF32, Shape{n, routing_.num_experts}, b.allocator());
  Buffer ids(DType::kI32, Shape{n, routing_.top_k}, b.allocator());
  Buffer weights(DType::kF32, Shape{n, routing_.top_k}, b.allocator());
  b.Linear(x, router_.tensor(), logits);
  b.MoeRoute(logits, bias_, routing_, ids, weights);
  b.MoeExperts(x, ids, weights, gate_up_views_, down_views_, out);
  if (shared_) {
    Buffer shared(DType::kF32, out.shape, b.allocator());
    shared_->Forward(b, x, shared);
    b.Add(out, shared, out);
  }
}

DeepseekFeedForward::DeepseekFeedForward(const io::ModelConfig& c, bool moe, const std::string& prefix,
                                         WeightLoader& loader, const RankInfo& rank) {
  if (moe) {
    moe_ = std::make_unique<DeepseekMoe>(c, prefix, loader, rank);
  } else {
    mlp_ = std::make_unique<SwiGluMlp>(
        prefix, c.hidden_size, c.intermediate_size,
        EvenPart(c.intermediate_size, rank.world_size(), rank.world_rank(), "intermediate_size"), loader);
  }
}

void DeepseekFeedForward::Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const {
  if (moe_) {
    moe_->Forward(b, x, out);
  } else {
    mlp_->Forward(b, x, out);
  }
}

}  // namespace fission::model
