// The acceptance rule of speculative decoding (engine/speculative_acceptance.h) over a small
// vocabulary: greedy acceptance is the longest matching prefix, and rejection sampling with a
// one-hot draft leaves every emitted token distributed as the target says (chi-square over many
// seeded draws), whatever the draft.
#include <gtest/gtest.h>

#include <vector>

#include "engine/speculative_acceptance.h"

namespace fission::engine {
namespace {

TEST(SpeculativeAcceptance, GreedyAcceptsTheMatchingPrefix) {
  EXPECT_EQ(AcceptGreedy(std::vector<std::int32_t>{4, 5, 6, 7}, std::vector<std::int32_t>{4, 5, 6}), 3);
  EXPECT_EQ(AcceptGreedy(std::vector<std::int32_t>{4, 9, 6, 7}, std::vector<std::int32_t>{4, 5, 6}), 1);
  EXPECT_EQ(AcceptGreedy(std::vector<std::int32_t>{1, 5}, std::vector<std::int32_t>{4}), 0);
}

kernels::SamplingDistribution Dist(std::vector<double> probs) {
  kernels::SamplingDistribution d;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    d.ids.push_back(static_cast<std::int32_t>(i));
    d.probs.push_back(probs[i]);
  }
  return d;
}

double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probs, int n) {
  double chi2 = 0.0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    const double expected = probs[i] * n;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  return chi2;
}

// Two drafts over a vocabulary of 5: the first emitted token follows p0; given that the first
// draft was accepted, the second follows p1; given both, the third follows p2.
TEST(SpeculativeAcceptance, RejectionSamplingKeepsTheTargetDistribution) {
  const std::vector<double> p0 = {0.1, 0.4, 0.2, 0.25, 0.05}, p1 = {0.3, 0.3, 0.1, 0.2, 0.1},
                            p2 = {0.05, 0.15, 0.5, 0.1, 0.2};
  const std::vector<kernels::SamplingDistribution> rows = {Dist(p0), Dist(p1), Dist(p2)};
  // df = 4: the 0.999 quantile is 18.47.
  for (const std::vector<std::int32_t>& drafts : {std::vector<std::int32_t>{1, 0}, std::vector<std::int32_t>{4, 2}}) {
    std::vector<int> first(5, 0), second(5, 0), third(5, 0);
    int n_second = 0, n_third = 0;
    const int n = 40000;
    std::vector<int> lengths(4, 0);
    for (int s = 0; s < n; ++s) {
      const std::vector<std::int32_t> out = AcceptSampled(rows, drafts, 77 + s, 3);
      ASSERT_GE(out.size(), 1u);
      ASSERT_LE(out.size(), 3u);
      ++lengths[out.size()];
      ++first[out[0]];
      if (out[0] == drafts[0]) {
        ASSERT_GE(out.size(), 2u);
        ++second[out[1]];
        ++n_second;
        if (out[1] == drafts[1]) {
          ASSERT_EQ(out.size(), 3u);
          ++third[out[2]];
          ++n_third;
        }
      } else {
        EXPECT_EQ(out.size(), 1u);
      }
    }
    EXPECT_LT(ChiSquare(first, p0, n), 18.47);
    EXPECT_LT(ChiSquare(second, p1, n_second), 18.47);
    EXPECT_LT(ChiSquare(third, p2, n_third), 18.47);
    // The acceptance rate of the first draft is its target probability.
    EXPECT_NEAR(static_cast<double>(n_second) / n, p0[drafts[0]], 0.01);
  }
}

TEST(SpeculativeAcceptance, ACertainDraftIsAlwaysAcceptedAndAnImpossibleOneNever) {
  const std::vector<kernels::SamplingDistribution> rows = {Dist({0, 1, 0}), Dist({0.5, 0, 0.5})};
  for (int s = 0; s < 200; ++s) {
    EXPECT_EQ(AcceptSampled(rows, std::vector<std::int32_t>{1}, s, 0).size(), 2u);
    const std::vector<std::int32_t> out = AcceptSampled(rows, std::vector<std::int32_t>{0}, s, 0);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], 1);
  }
}

}  // namespace
}  // namespace fission::engine
