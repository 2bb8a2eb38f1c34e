#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"

namespace fission::engine {

namespace {

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

}  // namespace

std::uint64_t MixSeed(std::uint64_t a, std::uint64_t b) { return SplitMix64(SplitMix64(a) ^ (b * 0xd1b54a32d192ed03ull)); }

double UniformFromSeed(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(MixSeed(seed, counter) >> 11) * 0x1.0p-53;
}

TokenLogprob Sampler::Logprob(const float* logits, std::int64_t vocab_size, std::int32_t token, std::int32_t top) {
  FISSION_CHECK(token >= 0 && token < vocab_size);
  const double lse = LogSumExp(logits, vocab_size);
  TokenLogprob out;
  out.token_id = token;
  out.logprob = static_cast<float>(static_cast<double>(logits[token]) - lse);
  out.top = TopEntries(logits, vocab_size, lse, top, order_);
  return out;
}

std::int32_t Sampler::Sample(const float* logits, std::int64_t vocab_size, const Sequence& seq,
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
    const double u = UniformFromSeed(seq.seed, static_cast<std::uint64_t>(seq.num_output())) * total;
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

}  // namespace fission::engine
