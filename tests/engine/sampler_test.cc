// The sampler on hand-made logits: each parameter changes the draw the way it should.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace fission::engine {
namespace {

struct Draws {
  std::map<std::int32_t, int> counts;
  int total = 0;
  double fraction(std::int32_t t) const { return counts.contains(t) ? counts.at(t) / static_cast<double>(total) : 0.0; }
};

Sequence MakeSequence(const SamplingParams& params, std::uint64_t seed = 1) {
  Sequence seq;
  seq.params = std::make_shared<SamplingParams>(params);
  seq.seed = seed;
  seq.tokens = {0};
  seq.prompt_len = 1;
  return seq;
}

Draws DrawMany(const std::vector<float>& logits, const SamplingParams& params, int count = 4000) {
  Sampler sampler({});
  Draws d;
  for (int s = 0; s < count; ++s) {
    Sequence seq = MakeSequence(params, MixSeed(12345, s));
    ++d.counts[sampler.Sample(logits.data(), static_cast<std::int64_t>(logits.size()), seq, nullptr)];
    ++d.total;
  }
  return d;
}

std::vector<float> LogOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

TEST(SamplerTest, GreedyTakesTheArgmaxLowestIdOnTies) {
  Sampler sampler({});
  SamplingParams p;
  p.temperature = 0;
  Sequence seq = MakeSequence(p);
  std::vector<float> logits = {0.5f, 2.0f, 2.0f, 1.0f};
  EXPECT_EQ(sampler.Sample(logits.data(), 4, seq, nullptr), 1);
}

TEST(SamplerTest, SamplingFollowsTheTemperatureScaledSoftmax) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  for (double t : {1.0, 2.0, 0.5}) {
    SamplingParams p;
    p.temperature = t;
    const Draws d = DrawMany(logits, p);
    double z = 0;
    for (float l : logits) z += std::exp(l / t);
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(d.fraction(i), std::exp(logits[i] / t) / z, 0.03) << "T=" << t << " token " << i;
  }
}

TEST(SamplerTest, TopKKeepsTheKMostLikely) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.5f};
  SamplingParams p;
  p.top_k = 2;
  const Draws d = DrawMany(logits, p);
  EXPECT_EQ(d.fraction(0) + d.fraction(3), 0.0);
  EXPECT_GT(d.fraction(2), 0.1);
  p.top_k = -1;
  EXPECT_GT(DrawMany(logits, p).fraction(0), 0.0);
}

TEST(SamplerTest, TopPKeepsTheSmallestNucleus) {
  const std::vector<float> logits = LogOf({0.2, 0.5, 0.3});
  SamplingParams p;
  p.top_p = 0.75;  // {1, 2} reach 0.8
  Draws d = DrawMany(logits, p);
  EXPECT_EQ(d.fraction(0), 0.0);
  EXPECT_NEAR(d.fraction(1), 0.5 / 0.8, 0.03);
  p.top_p = 0.4;  // {1}
  EXPECT_EQ(DrawMany(logits, p).fraction(1), 1.0);
  p.top_p = 1.0;
  EXPECT_NEAR(DrawMany(logits, p).fraction(0), 0.2, 0.03);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheBest) {
  const std::vector<float> logits = LogOf({0.2, 0.5, 0.3});
  SamplingParams p;
  p.min_p = 0.5;  // threshold 0.25: {1, 2}
  Draws d = DrawMany(logits, p);
  EXPECT_EQ(d.fraction(0), 0.0);
  EXPECT_NEAR(d.fraction(2), 0.3 / 0.8, 0.03);
  p.min_p = 0.7;  // threshold 0.35: {1}
  EXPECT_EQ(DrawMany(logits, p).fraction(1), 1.0);
}

TEST(SamplerTest, TheSameSeedAndTokenIndexGiveTheSameDraw) {
  const std::vector<float> logits = {1.0f, 1.1f, 0.9f, 1.05f, 0.95f};
  SamplingParams p;
  Sampler sampler({});
  std::set<std::int32_t> seen;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    Sequence a = MakeSequence(p, seed), b = MakeSequence(p, seed);
    const std::int32_t ta = sampler.Sample(logits.data(), 5, a, nullptr);
    EXPECT_EQ(ta, sampler.Sample(logits.data(), 5, b, nullptr));
    seen.insert(ta);
  }
  EXPECT_GT(seen.size(), 2u);  // different seeds, different draws
  // The draw depends on the index of the token being produced.
  std::set<std::int32_t> by_index;
  for (int extra = 0; extra < 20; ++extra) {
    Sequence s = MakeSequence(p, 7);
    s.tokens.resize(1 + extra, 0);
    by_index.insert(sampler.Sample(logits.data(), 5, s, nullptr));
  }
  EXPECT_GT(by_index.size(), 2u);
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  Sampler sampler({});
  SamplingParams p;
  p.temperature = 0;
  p.repetition_penalty = 2.0;
  Sequence seq = MakeSequence(p);
  seq.seen_tokens = {0};
  std::vector<float> positive = {3.0f, 2.0f};  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(sampler.Sample(positive.data(), 2, seq, nullptr), 1);
  std::vector<float> negative = {-1.0f, -1.5f};  // -1 * 2 = -2 < -1.5
  EXPECT_EQ(sampler.Sample(negative.data(), 2, seq, nullptr), 1);
  seq.seen_tokens.clear();
  EXPECT_EQ(sampler.Sample(positive.data(), 2, seq, nullptr), 0);
}

TEST(SamplerTest, FrequencyPenaltyScalesWithCountPresencePenaltyDoesNot) {
  Sampler sampler({});
  std::vector<float> logits = {3.0f, 2.5f};
  SamplingParams p;
  p.temperature = 0;
  p.frequency_penalty = 0.3;
  Sequence seq = MakeSequence(p);
  seq.output_counts = {{0, 1}};  // 3 - 0.3 > 2.5
  EXPECT_EQ(sampler.Sample(logits.data(), 2, seq, nullptr), 0);
  seq.output_counts = {{0, 2}};  // 3 - 0.6 < 2.5
  EXPECT_EQ(sampler.Sample(logits.data(), 2, seq, nullptr), 1);

  SamplingParams q;
  q.temperature = 0;
  q.presence_penalty = 0.6;
  Sequence s2 = MakeSequence(q);
  s2.output_counts = {{0, 1}};  // 3 - 0.6 < 2.5
  EXPECT_EQ(sampler.Sample(logits.data(), 2, s2, nullptr), 1);
  q.presence_penalty = 0.4;
  Sequence s3 = MakeSequence(q);
  s3.output_counts = {{0, 5}};  // 3 - 0.4 > 2.5, whatever the count
  EXPECT_EQ(sampler.Sample(logits.data(), 2, s3, nullptr), 0);
}

TEST(SamplerTest, MinNewTokensMasksEosAndStopTokens) {
  Sampler sampler({2});
  std::vector<float> logits = {1.0f, 2.0f, 5.0f, 4.0f};
  SamplingParams p;
  p.temperature = 0;
  p.min_new_tokens = 2;
  p.stop_token_ids = {3};
  Sequence seq = MakeSequence(p);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, seq, nullptr), 1);  // EOS 2 and stop 3 masked
  seq.tokens = {0, 1, 1};                                          // two tokens generated
  EXPECT_EQ(sampler.Sample(logits.data(), 4, seq, nullptr), 2);
  // With ignore_eos, EOS is an ordinary token and stays.
  SamplingParams q = p;
  q.ignore_eos = true;
  Sequence s2 = MakeSequence(q);
  EXPECT_EQ(sampler.Sample(logits.data(), 4, s2, nullptr), 2);
}

TEST(SamplerTest, LogprobsAreTheLogSoftmaxWithSortedAlternatives) {
  Sampler sampler({});
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = true;
  p.top_logprobs = 3;
  Sequence seq = MakeSequence(p);
  TokenLogprob lp;
  EXPECT_EQ(sampler.Sample(logits.data(), 4, seq, &lp), 1);
  double z = 0;
  for (float l : logits) z += std::exp(l);
  EXPECT_NEAR(lp.logprob, 3.0 - std::log(z), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token_id, 1);
  EXPECT_EQ(lp.top[1].token_id, 2);
  EXPECT_EQ(lp.top[2].token_id, 0);
  EXPECT_NEAR(lp.top[2].logprob, 1.0 - std::log(z), 1e-5);
  // Logprobs reflect the temperature.
  p.temperature = 2.0;
  Sequence s2 = MakeSequence(p);
  TokenLogprob lp2;
  const std::int32_t t = sampler.Sample(logits.data(), 4, s2, &lp2);
  double z2 = 0;
  for (float l : logits) z2 += std::exp(l / 2.0);
  EXPECT_NEAR(lp2.logprob, logits[t] / 2.0 - std::log(z2), 1e-5);
  // Prompt logprobs use the raw logits.
  const TokenLogprob prompt = sampler.Logprob(logits.data(), 4, 3, 1);
  EXPECT_NEAR(prompt.logprob, 0.0 - std::log(z), 1e-5);
  ASSERT_EQ(prompt.top.size(), 1u);
  EXPECT_EQ(prompt.top[0].token_id, 1);
}

TEST(SamplerTest, TopPOnALargeVocabularyKeepsExactlyTheNucleus) {
  constexpr int kVocab = 3000;
  for (double spread : {12.0, 0.5}) {  // peaked (nucleus well under 1024 tokens) and flat (over)
    std::vector<float> logits(kVocab);
    std::uint64_t h = 99;
    for (float& l : logits) {
      h = MixSeed(h, 1);
      l = static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-53 * spread);
    }
    SamplingParams p;
    p.top_p = 0.9;
    // The nucleus by a full sort, computed here independently.
    double max = *std::max_element(logits.begin(), logits.end()), total = 0;
    std::vector<double> pr(kVocab);
    for (int i = 0; i < kVocab; ++i) total += pr[i] = std::exp(static_cast<double>(logits[i]) - max);
    std::vector<int> order(kVocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); });
    std::set<std::int32_t> nucleus;
    double cum = 0;
    for (int t : order) {
      nucleus.insert(t);
      cum += pr[t];
      if (cum >= 0.9 * total) break;
    }
    const Draws d = DrawMany(logits, p, 3000);
    for (const auto& [token, count] : d.counts) EXPECT_TRUE(nucleus.contains(token)) << "spread " << spread << " token " << token;
    if (nucleus.size() > 1024) {
      // Tokens ranked past the first sorted prefix are drawn too.
      std::set<std::int32_t> tail_tokens(order.begin() + 1024, order.begin() + nucleus.size());
      int tail_draws = 0;
      for (const auto& [token, count] : d.counts) tail_draws += tail_tokens.contains(token) ? count : 0;
      EXPECT_GT(tail_draws, 0);
    } else {
      EXPECT_LT(nucleus.size(), 1024u);
    }
  }
}

}  // namespace
}  // namespace fission::engine

namespace fission::engine {
namespace {

// Structured outputs: tokens outside the allowed bitmask get no probability, greedy or sampled,
// and logprobs are those of the constrained distribution.
TEST(SamplerTest, AllowedTokenMaskKeepsOnlyTheAllowedTokens) {
  const std::vector<float> logits = {3.0f, 1.0f, 2.5f, 0.5f, 2.0f, 4.0f, 0.0f, 1.5f, 0.2f, 0.1f,
                                     0.3f, 0.4f, 0.6f, 0.7f, 0.8f, 0.9f, 1.1f, 1.2f, 1.3f, 1.4f,
                                     1.6f, 1.7f, 1.8f, 1.9f, 2.1f, 2.2f, 2.3f, 2.4f, 2.6f, 2.7f,
                                     2.8f, 2.9f, 3.1f, 3.2f};  // 34 tokens: the mask has 2 words
  const std::int64_t vocab = static_cast<std::int64_t>(logits.size());
  std::vector<std::uint32_t> mask(kernels::AllowedWords(vocab), 0u);
  for (std::int32_t t : {1, 2, 4, 33}) mask[t >> 5] |= 1u << (t & 31);
  kernels::HostSamplingScratch scratch;
  kernels::SamplingRow row;
  row.temperature = 0.0;
  row.allowed_tokens = mask;
  row.want_logprob = true;
  row.top_logprobs = 3;
  const kernels::SampledToken greedy = kernels::SampleOnHost(logits.data(), vocab, row, scratch);
  EXPECT_EQ(greedy.token, 33) << "the best allowed token, not the best token (5)";
  const double z = std::exp(3.2) + std::exp(2.5) + std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(greedy.logprob, 3.2 - std::log(z), 1e-5);
  EXPECT_EQ(greedy.top_ids, (std::vector<std::int32_t>{33, 2, 4}));
  row.temperature = 1.0;
  row.want_logprob = false;
  row.top_logprobs = 0;
  std::map<std::int32_t, int> counts;
  for (std::uint64_t s = 0; s < 3000; ++s) {
    row.seed = s;
    ++counts[kernels::SampleOnHost(logits.data(), vocab, row, scratch).token];
  }
  for (const auto& [t, c] : counts) EXPECT_TRUE(t == 1 || t == 2 || t == 4 || t == 33) << t;
  EXPECT_NEAR(counts[2] / 3000.0, std::exp(2.5) / z, 0.03);
}

}  // namespace
}  // namespace fission::engine
