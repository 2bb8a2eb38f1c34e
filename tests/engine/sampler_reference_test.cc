// The sampler as it was before its arithmetic moved to kernels::SampleOnHost, kept verbatim as the
// oracle: the engine's Sampler (and so Backend::Sample's reference) must give the same tokens and
// the same logprob bits on every parameter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "engine/sampler.h"

namespace fission::engine {
namespace {

class LegacySampler {
 public:
  explicit LegacySampler(std::vector<std::int32_t> eos_token_ids) : eos_token_ids_(std::move(eos_token_ids)) {}
  std::int32_t Sample(const float* logits, std::int64_t vocab_size, const Sequence& seq, TokenLogprob* logprob);
  TokenLogprob Logprob(const float* logits, std::int64_t vocab_size, std::int32_t token, std::int32_t top);

 private:
  std::vector<std::int32_t> eos_token_ids_;
  std::vector<float> scratch_;
  std::vector<double> probs_;
  std::vector<std::int32_t> order_;
};

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// log(sum(exp(x))) over a row, in double.
double LogSumExp(const float* x, std::int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  if (!std::isfinite(max)) return max;
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
  return max + std::log(sum);
}

// The `count` largest entries of x, most likely first, ties by lower id.
std::vector<TopLogprob> TopEntries(const float* x, std::int64_t n, double lse, std::int32_t count,
                                   std::vector<std::int32_t>& order) {
  std::vector<TopLogprob> top;
  if (count <= 0) return top;
  count = static_cast<std::int32_t>(std::min<std::int64_t>(count, n));
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + count, order.end(),
                    [x](std::int32_t a, std::int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  for (std::int32_t i = 0; i < count; ++i)
    top.push_back({order[i], static_cast<float>(static_cast<double>(x[order[i]]) - lse)});
  return top;
}


std::uint64_t LegacyMixSeed(std::uint64_t a, std::uint64_t b) { return SplitMix64(SplitMix64(a) ^ (b * 0xd1b54a32d192ed03ull)); }

double LegacyUniform(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(LegacyMixSeed(seed, counter) >> 11) * 0x1.0p-53;
}

TokenLogprob LegacySampler::Logprob(const float* logits, std::int64_t vocab_size, std::int32_t token, std::int32_t top) {
  FISSION_CHECK(token >= 0 && token < vocab_size);
  const double lse = LogSumExp(logits, vocab_size);
  TokenLogprob out;
  out.token_id = token;
  out.logprob = static_cast<float>(static_cast<double>(logits[token]) - lse);
  out.top = TopEntries(logits, vocab_size, lse, top, order_);
  return out;
}

std::int32_t LegacySampler::Sample(const float* logits, std::int64_t vocab_size, const Sequence& seq,
                             TokenLogprob* logprob) {
  const SamplingParams& p = *seq.params;
  scratch_.assign(logits, logits + vocab_size);
  float* x = scratch_.data();

  if (p.repetition_penalty != 1.0) {
    const float rp = static_cast<float>(p.repetition_penalty);
    for (std::int32_t t : seq.seen_tokens) x[t] = x[t] > 0.0f ? x[t] / rp : x[t] * rp;
  }
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    for (const auto& [t, count] : seq.output_counts)
      x[t] -= static_cast<float>(p.frequency_penalty * count + (count > 0 ? p.presence_penalty : 0.0));
  }
  if (seq.num_output() < p.min_new_tokens) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    for (std::int32_t t : p.stop_token_ids) x[t] = kMasked;
    if (!p.ignore_eos)
      for (std::int32_t t : eos_token_ids_)
        if (t >= 0 && t < vocab_size) x[t] = kMasked;
  }
  if (!p.greedy()) {
    const float temperature = static_cast<float>(p.temperature);
    for (std::int64_t i = 0; i < vocab_size; ++i) x[i] /= temperature;
  }

  std::int32_t token = 0;
  if (p.greedy()) {
    for (std::int64_t i = 1; i < vocab_size; ++i)
      if (x[i] > x[token]) token = static_cast<std::int32_t>(i);
  } else {
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t i = 0; i < vocab_size; ++i) max = std::max(max, x[i]);
    probs_.resize(vocab_size);
    for (std::int64_t i = 0; i < vocab_size; ++i) probs_[i] = std::exp(static_cast<double>(x[i]) - max);
    const double* pr = probs_.data();
    const std::int64_t k = (p.top_k > 0 && p.top_k < vocab_size) ? p.top_k : vocab_size;
    order_.resize(vocab_size);
    std::iota(order_.begin(), order_.end(), 0);
    const auto more_likely = [pr](std::int32_t a, std::int32_t b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); };
    if (k < vocab_size) {
      std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), more_likely);
      order_.resize(k);
    }
    if (p.top_p < 1.0) {
      // The nucleus is a prefix of the candidates sorted by probability. Sorting a short prefix
      // first usually finds it; the full sort is the fallback. Either way the result is the same.
      double total = 0.0;
      for (std::int32_t t : order_) total += pr[t];
      const double target = p.top_p * total;
      std::size_t sorted = std::min<std::size_t>(order_.size(), 1024);
      std::size_t keep = 0;
      while (true) {
        std::partial_sort(order_.begin(), order_.begin() + sorted, order_.end(), more_likely);
        double cum = 0.0;
        keep = 0;
        while (keep < sorted) {
          cum += pr[order_[keep++]];
          if (cum >= target) break;
        }
        if (cum >= target || sorted == order_.size()) break;
        sorted = order_.size();
      }
      order_.resize(std::max<std::size_t>(keep, 1));
    }
    if (p.min_p > 0.0) {
      double max_p = 0.0;
      for (std::int32_t t : order_) max_p = std::max(max_p, pr[t]);
      const double threshold = p.min_p * max_p;
      std::erase_if(order_, [pr, threshold](std::int32_t t) { return pr[t] < threshold; });
    }
    double total = 0.0;
    for (std::int32_t t : order_) total += pr[t];
    const double u = LegacyUniform(seq.seed, static_cast<std::uint64_t>(seq.num_output())) * total;
    double cum = 0.0;
    token = order_.back();
    for (std::int32_t t : order_) {
      cum += pr[t];
      if (cum > u && pr[t] > 0.0) {
        token = t;
        break;
      }
    }
  }

  if (logprob != nullptr) {
    const double lse = LogSumExp(x, vocab_size);
    logprob->token_id = token;
    logprob->logprob = static_cast<float>(static_cast<double>(x[token]) - lse);
    logprob->top = TopEntries(x, vocab_size, lse, p.top_logprobs, order_);
  }
  return token;
}

void ExpectSame(const TokenLogprob& a, const TokenLogprob& b, const std::string& what) {
  EXPECT_EQ(a.token_id, b.token_id) << what;
  EXPECT_EQ(a.logprob, b.logprob) << what;
  ASSERT_EQ(a.top.size(), b.top.size()) << what;
  for (std::size_t i = 0; i < a.top.size(); ++i) {
    EXPECT_EQ(a.top[i].token_id, b.top[i].token_id) << what << " top " << i;
    EXPECT_EQ(a.top[i].logprob, b.top[i].logprob) << what << " top " << i;
  }
}

TEST(SamplerReferenceTest, TheSeededUniformIsUnchanged) {
  for (std::uint64_t s = 0; s < 100; ++s) {
    EXPECT_EQ(MixSeed(s, s * 7 + 1), LegacyMixSeed(s, s * 7 + 1));
    EXPECT_EQ(UniformFromSeed(s * 31, s), LegacyUniform(s * 31, s));
  }
}

// Random rows, random parameters (every one of them, alone and together): the same tokens and the
// same logprob bits as before.
TEST(SamplerReferenceTest, EveryParameterGivesTheOldTokensAndLogprobs) {
  std::mt19937 rng(7);
  const std::vector<std::int32_t> eos = {3, 5};
  Sampler sampler(eos);
  LegacySampler legacy(eos);
  int differing_draws = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::int64_t vocab = std::vector<std::int64_t>{7, 33, 1000, 3001}[trial % 4];
    std::normal_distribution<float> normal(0.0f, trial % 3 == 0 ? 4.0f : 1.0f);
    std::vector<float> logits(vocab);
    for (float& l : logits) l = normal(rng);
    if (trial % 5 == 0) logits[vocab / 2] = logits[vocab / 3];  // an exact tie
    SamplingParams p;
    const int which = trial % 9;
    p.temperature = which == 0 ? 0.0 : std::vector<double>{1.0, 0.7, 1.3}[trial % 3];
    if (which == 1 || which == 8) p.top_k = 1 + static_cast<int>(rng() % std::min<std::int64_t>(vocab, 50));
    if (which == 2 || which == 8) p.top_p = 0.3 + 0.6 * (rng() % 100) / 100.0;
    if (which == 3 || which == 8) p.min_p = 0.02 + 0.3 * (rng() % 100) / 100.0;
    if (which == 4) p.repetition_penalty = 1.3;
    if (which == 5) {
      p.frequency_penalty = 0.4;
      p.presence_penalty = -0.3;
    }
    if (which == 6) {
      p.min_new_tokens = 3;
      p.stop_token_ids = {1};
    }
    p.logprobs = trial % 2 == 0;
    p.top_logprobs = p.logprobs ? static_cast<std::int32_t>(trial % 6) : 0;
    Sequence seq;
    seq.params = std::make_shared<SamplingParams>(p);
    seq.seed = MixSeed(99, trial);
    seq.tokens = {0, 2, 4, 2};
    seq.prompt_len = 2;
    seq.seen_tokens = {0, 2, 4};
    seq.output_counts = {{4, 1}, {2, 1}};
    TokenLogprob a, b;
    const std::int32_t ta = sampler.Sample(logits.data(), vocab, seq, p.logprobs ? &a : nullptr);
    const std::int32_t tb = legacy.Sample(logits.data(), vocab, seq, p.logprobs ? &b : nullptr);
    const std::string what = "trial " + std::to_string(trial);
    EXPECT_EQ(ta, tb) << what;
    if (p.logprobs) ExpectSame(a, b, what);
    differing_draws += ta != sampler.Sample(logits.data(), vocab, seq, nullptr) ? 1 : 0;
    const std::int32_t target = static_cast<std::int32_t>(rng() % vocab);
    ExpectSame(sampler.Logprob(logits.data(), vocab, target, trial % 4),
               legacy.Logprob(logits.data(), vocab, target, trial % 4), what + " prompt logprob");
  }
  EXPECT_EQ(differing_draws, 0);  // the draw does not depend on whether logprobs are asked
}

}  // namespace
}  // namespace fission::engine
