// Expert parallelism's dispatch plan: which rank computes each (token, routed expert) pair of a
// rank's tokens, and how the results come back. Built on the host from the routing, so that the
// all-to-all's counts are known before it runs; TokenLayout::ExpertParallel carries it out.
//
// The world's ranks hold the routed experts in `ep_size` EP ranks of `moe_tp` ranks each: EP rank
// p holds experts [p · E / ep, (p + 1) · E / ep) and its moe_tp ranks (world ranks p · moe_tp + t)
// each hold a slice of those experts' intermediate units, so a pair goes to all moe_tp of them and
// their partial results are added where the token is.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fission::model {

struct ExpertDispatch {
  std::vector<std::int64_t> send_rows;   // [world] rows sent to each world rank
  std::vector<std::int32_t> send_index;  // [S] the token of each sent row, grouped by destination
  std::vector<float> send_meta;          // [S, 2] the expert's index on its EP rank, the routing weight
  // The returned rows, sent rows in the same order, summed per token: combine[j][i] is the row of
  // token i's j-th partial result (j over its experts in ascending order, then the moe_tp ranks).
  std::vector<std::vector<std::int32_t>> combine;  // [top_k · moe_tp][tokens]
};

// The plan for `tokens` rows routed to `ids` [tokens, top_k] with `weights` [tokens, top_k].
ExpertDispatch PlanExpertDispatch(std::span<const std::int32_t> ids, std::span<const float> weights,
                                  std::int64_t tokens, int top_k, int num_experts, int ep_size, int moe_tp);

}  // namespace fission::model
