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
  // Experts are kept as plain tensors so the backend can run them as one grouped operation. Tensor
  // parallel: each rank holds the same slice of every expert's intermediate units; expert parallel:
  // its EP rank's experts, sliced over that EP rank's ranks.
  expert_parallel_ = rank.ep_size() > 1;
  if (c.n_routed_experts % rank.ep_size() != 0)
    Fail("--ep-size ", rank.ep_size(), " must divide the routed experts (n_routed_experts ", c.n_routed_experts, ")");
  const std::int64_t per_rank = c.n_routed_experts / rank.ep_size();
  const Range part = EvenPart(c.moe_intermediate_size, rank.moe_tp_size(), rank.moe_tp_rank(), "moe_intermediate_size");
  for (std::int64_t e = rank.ep_rank() * per_rank; e < (rank.ep_rank() + 1) * per_rank; ++e) {
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
  }
  if (c.n_shared_experts > 0) {
    const std::int64_t shared_inter = c.moe_intermediate_size * c.n_shared_experts;
    if (expert_parallel_ || !LoadSharedAsExperts(c, prefix + "shared_experts.", part, loader)) {
      shared_ = std::make_unique<SwiGluMlp>(
          prefix + "shared_experts.", c.hidden_size, shared_inter,
          expert_parallel_ ? Range{0, shared_inter}
                           : EvenPart(shared_inter, rank.world_size(), rank.world_rank(), "shared experts' intermediate size"),
          loader);
    }
  }
  for (std::size_t e = 0; e < gate_up_.size(); ++e) {
    gate_up_views_.push_back(gate_up_[e].view());
    down_views_.push_back(down_[e].view());
  }
}

// The shared experts' intermediate units are n_shared_experts pieces of moe_intermediate_size, and
// the MLP is the sum of its pieces' MLPs (SiLU·up is per unit, down is linear), so piece i is an
// expert like the routed ones that every token takes with weight 1: routing appends them
// (MoeRouting::shared_experts) and the experts operation runs them in the routed experts' launches
// instead of a dense MLP and an add beside them. Each piece is a product of its own, so a token's
// sum does not depend on the batch. A rank keeps its tensor-parallel part of each piece, as of
// every routed expert. Expert parallelism keeps the dense MLP (its dispatch moves routed pairs only).
bool DeepseekMoe::LoadSharedAsExperts(const io::ModelConfig& c, const std::string& prefix, Range part,
                                      WeightLoader& loader) {
  const std::int64_t inter = c.moe_intermediate_size, shared_inter = inter * c.n_shared_experts;
  // Routed experts kept in a format the shared MLP is not kept in (MXFP4 experts kept as stored,
  // an online plan that names only the experts) cannot be joined: decided from the metadata,
  // before any piece is read. Other mismatches (a slice off the blocks) show once loaded.
  const WeightFormat& routed = gate_up_[0].format;
  if (routed.quantized() && loader.KeptFormatOf(prefix + "gate_proj.weight") != routed) return false;
  std::vector<Weight> gate_up, down;
  for (std::int64_t i = 0; i < c.n_shared_experts; ++i) {
    const Range piece{i * inter + part.begin, i * inter + part.stop(inter)};
    gate_up.push_back(loader.LoadLinearStacked(prefix + "gate_proj.weight", prefix + "up_proj.weight",
                                               Shape{shared_inter, c.hidden_size}, piece));
    down.push_back(loader.LoadLinearCols(prefix + "down_proj.weight", Shape{c.hidden_size, shared_inter}, piece,
                                         /*allow_fp8=*/gate_up.back().quantized()));
    if (!(gate_up.back().format == gate_up_[0].format) || !(down.back().format == gate_up_[0].format)) return false;
  }
  for (std::size_t i = 0; i < gate_up.size(); ++i) {
    gate_up_.push_back(std::move(gate_up[i]));
    down_.push_back(std::move(down[i]));
  }
  routing_.shared_experts = c.n_shared_experts;
  return true;
}

void DeepseekMoe::Route(kernels::Backend& b, const Tensor& x, const Tensor& ids, const Tensor& weights) const {
  Buffer logits(DType::kF32, Shape{x.shape[0], routing_.num_experts}, b.allocator());
  b.Linear(x, router_.tensor(), logits);
  b.MoeRoute(logits, bias_, routing_, ids, weights);
}

void DeepseekMoe::RunExpertParallel(const StepContext& step, const Tensor& x, const Tensor& out) const {
  kernels::Backend& b = *step.backend;
  TokenLayout::ExpertParallelMoe moe;
  moe.num_experts = static_cast<int>(routing_.num_experts);
  moe.top_k = static_cast<int>(routing_.top_k);
  moe.route = [&](const Tensor& in, const Tensor& ids, const Tensor& weights) { Route(b, in, ids, weights); };
  moe.experts = [&](const Tensor& in, const Tensor& ids, const Tensor& weights, const Tensor& y) {
    b.MoeExperts(in, ids, weights, gate_up_views_, down_views_, y);
  };
  if (shared_) {
    moe.add_shared = [&](const Tensor& in, const Tensor& acc) {
      Buffer shared(DType::kF32, acc.shape, b.allocator());
      shared_->Forward(b, in, shared);
      b.Add(acc, shared, acc);
    };
  }
  step.layout->ExpertParallel(x, out, moe);
}

void DeepseekMoe::Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const {
  const std::int64_t n = x.shape[0], columns = routing_.top_k + routing_.shared_experts;
  Buffer ids(DType::kI32, Shape{n, columns}, b.allocator());
  Buffer weights(DType::kF32, Shape{n, columns}, b.allocator());
  Route(b, x, ids, weights);
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

void DeepseekFeedForward::Run(const StepContext& step, const Tensor& x, const Tensor& out) const {
  kernels::Backend& b = *step.backend;
  if (moe_ && moe_->expert_parallel()) return moe_->RunExpertParallel(step, x, out);
  if (moe_) step.layout->CountTensorParallelExpertLoad(moe_->top_k());
  step.layout->FeedForward(x, out, [&](const Tensor& in, const Tensor& partial) {
    if (moe_) {
      moe_->Forward(b, in, partial);
    } else {
      mlp_->Forward(b, in, partial);
    }
  });
}

}  // namespace fission::model
