#include "model/layers/v4_moe.h"

namespace fission::model {

V4Moe::V4Moe(const io::ModelConfig& c, std::int64_t layer, WeightLoader& loader, const RankInfo& rank)
    : experts_(c.n_routed_experts),
      top_k_(c.num_experts_per_tok),
      scaling_(static_cast<float>(c.routed_scaling_factor)),
      limit_(static_cast<float>(c.v4->swiglu_limit)) {
  const std::string prefix = StrCat("layers.", layer, ".ffn.");
  router_ = loader.LoadF32(prefix + "gate.weight", Shape{experts_, c.hidden_size});
  if (c.v4->hash_routed[static_cast<std::size_t>(layer)]) {
    const Shape shape{c.vocab_size, top_k_};
    std::vector<std::int32_t> table = loader.LoadIndexTable(prefix + "gate.tid2eid", shape, experts_);
    tid2eid_ = Buffer(DType::kI32, shape, loader.backend().allocator());
    loader.backend().CopyBytesFromHost(table.data(), tid2eid_);
  } else {
    bias_ = loader.LoadBias(prefix + "gate.bias", experts_);
  }
  const Range part = EvenPart(c.moe_intermediate_size, rank.world_size(), rank.world_rank(), "moe_intermediate_size");
  const Shape up{c.moe_intermediate_size, c.hidden_size}, down{c.hidden_size, c.moe_intermediate_size};
  for (std::int64_t e = 0; e < experts_; ++e) {
    const std::string p = StrCat(prefix, "experts.", e, ".");
    gate_up_.push_back(loader.LoadLinearStacked(p + "w1.weight", p + "w3.weight", up, part));
    down_.push_back(loader.LoadLinearCols(p + "w2.weight", down, part, /*allow_fp8=*/gate_up_.back().quantized()));
    gate_up_views_.push_back(gate_up_.back().view());
    down_views_.push_back(down_.back().view());
  }
  // One shared expert of the routed experts' width, whatever n_shared_experts says (transformers
  // builds it so, and DeepSeek's reference requires n_shared_experts == 1).
  const std::int64_t shared = c.moe_intermediate_size;
  const Range shared_part = EvenPart(shared, rank.world_size(), rank.world_rank(), "shared experts' intermediate size");
  shared_inter_ = shared_part.size(shared);
  const std::string s = prefix + "shared_experts.";
  shared_gate_up_ = loader.LoadLinearStacked(s + "w1.weight", s + "w3.weight", Shape{shared, c.hidden_size}, shared_part);
  shared_down_ = loader.LoadLinearCols(s + "w2.weight", Shape{c.hidden_size, shared}, shared_part);
}

void V4Moe::Forward(kernels::Backend& b, const Tensor& x, std::span<const std::int32_t> token_ids,
                    const Tensor& out) const {
  const std::int64_t n = x.shape[0];
  Buffer logits(DType::kF32, Shape{n, experts_}, b.allocator());
  Buffer ids(DType::kI32, Shape{n, top_k_}, b.allocator()), weights(DType::kF32, Shape{n, top_k_}, b.allocator());
  b.Linear(x, router_.tensor(), logits);
  const bool hashed = !tid2eid_.empty();
  FISSION_CHECK(!hashed || static_cast<std::int64_t>(token_ids.size()) == n, "hash routing of ", n, " rows with ",
                token_ids.size(), " token ids");
  b.v4().RouteSqrtSoftplus(logits, bias_, tid2eid_.tensor(), hashed ? token_ids : std::span<const std::int32_t>(),
                           top_k_, scaling_, ids, weights);
  b.v4().MoeExperts(x, ids, weights, gate_up_views_, down_views_, limit_, out);
  Buffer gu(DType::kF32, Shape{n, 2 * shared_inter_}, b.allocator()), act(DType::kF32, Shape{n, shared_inter_}, b.allocator());
  Buffer shared(DType::kF32, out.shape, b.allocator());
  b.Linear(x, shared_gate_up_, gu);
  b.v4().ClampedSwiGlu(gu, limit_, act);
  b.Linear(act, shared_down_, shared);
  b.Add(out, shared, out);
}

}  // namespace fission::model
