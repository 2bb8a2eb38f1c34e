// Which draft tokens a verify run keeps, for chained one-token drafts (EAGLE with topk 1, NEXTN).
//
// A verify run of a sequence's last token and drafts d_1..d_k gives the target's logits at k + 1
// rows: row j predicts the token after d_j (row 0: after the last token). The run emits the
// accepted drafts and then one token of the target's own, so between 1 and k + 1 tokens.
//   Greedy: d_{j+1} is accepted while it is row j's argmax; the emitted tokens are the argmaxes of
//   rows 0..a, exactly what plain greedy decoding would produce.
//   Sampled: rejection sampling with a one-hot draft distribution q = δ(d): d_{j+1} is accepted with
//   probability min(1, p_j(d) / q(d)) = p_j(d); on rejection the token is drawn from the residual
//   max(0, p_j - q) renormalised, which is p_j without d; after k acceptances the last token is
//   drawn from p_k. Each emitted token is then distributed exactly as plain sampling from the
//   target would distribute it (Leviathan et al. 2023, Chen et al. 2023).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling.h"

namespace fission::engine {

// The number of drafts accepted given the target's greedy token at each row (k + 1 rows).
std::int32_t AcceptGreedy(std::span<const std::int32_t> target_tokens, std::span<const std::int32_t> drafts);

// The tokens a sampled verify run emits: `rows[j]` is the target's distribution at row j (k + 1
// of them, kernels::DistributionOnHost), `drafts` the k drafts. Draws are stateless: row j's
// acceptance test and its draw read UniformFromSeed on two streams of `seed` at counter
// `first_counter + j` (the index of the output token row j produces).
std::vector<std::int32_t> AcceptSampled(std::span<const kernels::SamplingDistribution> rows,
                                        std::span<const std::int32_t> drafts, std::uint64_t seed,
                                        std::uint64_t first_counter);

}  // namespace fission::engine
