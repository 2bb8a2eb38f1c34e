#include "engine/speculative_acceptance.h"

#include "base/error.h"

namespace fission::engine {
namespace {

// The acceptance tests' stream, apart from the draws (which use the sequence's seed as plain
// sampling does).
constexpr std::uint64_t kAcceptStream = 0x5eec'acce'97ull;

double ProbabilityOf(const kernels::SamplingDistribution& d, std::int32_t token) {
  for (std::size_t i = 0; i < d.ids.size(); ++i)
    if (d.ids[i] == token) return d.probs[i];
  return 0.0;
}

// An inverse-CDF draw from `d` without `excluded` (-1: none), renormalised.
std::int32_t DrawExcept(const kernels::SamplingDistribution& d, std::int32_t excluded, double u) {
  FISSION_CHECK(!d.ids.empty(), "a sampled row without candidates");
  double total = 0.0;
  for (std::size_t i = 0; i < d.ids.size(); ++i)
    if (d.ids[i] != excluded) total += d.probs[i];
  const double target = u * total;
  double cum = 0.0;
  std::int32_t last = d.ids.front();
  for (std::size_t i = 0; i < d.ids.size(); ++i) {
    if (d.ids[i] == excluded) continue;
    cum += d.probs[i];
    last = d.ids[i];
    if (cum > target) return d.ids[i];
  }
  return last;
}

}  // namespace

std::int32_t AcceptGreedy(std::span<const std::int32_t> target_tokens, std::span<const std::int32_t> drafts) {
  FISSION_CHECK(target_tokens.size() == drafts.size() + 1, "a verify run of ", drafts.size(), " drafts has ",
                target_tokens.size(), " rows");
  std::int32_t accepted = 0;
  while (accepted < static_cast<std::int32_t>(drafts.size()) && target_tokens[accepted] == drafts[accepted]) ++accepted;
  return accepted;
}

std::vector<std::int32_t> AcceptSampled(std::span<const kernels::SamplingDistribution> rows,
                                        std::span<const std::int32_t> drafts, std::uint64_t seed,
                                        std::uint64_t first_counter) {
  FISSION_CHECK(rows.size() == drafts.size() + 1, "a verify run of ", drafts.size(), " drafts has ", rows.size(),
                " rows");
  const std::uint64_t accept_seed = kernels::MixSeed(seed, kAcceptStream);
  std::vector<std::int32_t> out;
  for (std::size_t j = 0; j < drafts.size(); ++j) {
    const std::uint64_t counter = first_counter + j;
    const double p = ProbabilityOf(rows[j], drafts[j]);
    if (kernels::UniformFromSeed(accept_seed, counter) < p) {
      out.push_back(drafts[j]);
      continue;
    }
    // Rejected: the residual max(0, p - δ(d)) is p without d (a certain draft is never rejected).
    out.push_back(DrawExcept(rows[j], drafts[j], kernels::UniformFromSeed(seed, counter)));
    return out;
  }
  out.push_back(DrawExcept(rows.back(), -1, kernels::UniformFromSeed(seed, first_counter + drafts.size())));
  return out;
}

}  // namespace fission::engine
