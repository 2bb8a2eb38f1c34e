// The host reference of Backend::Sample (kernels/sampling.h). fp32 logits, fp64 probabilities and
// sums in a fixed order, so the same row gives the same token and logprobs on every run.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"
#include "kernels/sampling.h"

namespace fission::kernels {

namespace {

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
void TopEntries(const float* x, std::int64_t n, double lse, std::int32_t count, std::vector<std::int32_t>& order,
                SampledToken* out) {
  if (count <= 0) return;
  count = static_cast<std::int32_t>(std::min<std::int64_t>(count, n));
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + count, order.end(),
                    [x](std::int32_t a, std::int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  for (std::int32_t i = 0; i < count; ++i) {
    out->top_ids.push_back(order[i]);
    out->top_logprobs.push_back(static_cast<float>(static_cast<double>(x[order[i]]) - lse));
  }
}

void CheckIds(std::span<const std::int32_t> ids, std::int64_t vocab, const char* what) {
  for (std::int32_t t : ids) FISSION_CHECK(t >= 0 && t < vocab, what, " id ", t, " outside the vocabulary ", vocab);
}

// Penalties, masks and temperature, in the order of docs/engine.md.
void Prepare(const SamplingRow& p, std::int64_t vocab, float* x) {
  CheckIds(p.seen_tokens, vocab, "seen token");
  CheckIds(p.output_ids, vocab, "output token");
  CheckIds(p.masked_ids, vocab, "masked token");
  FISSION_CHECK(p.output_ids.size() == p.output_counts.size());
  if (p.repetition_penalty != 1.0) {
    const float rp = static_cast<float>(p.repetition_penalty);
    for (std::int32_t t : p.seen_tokens) x[t] = x[t] > 0.0f ? x[t] / rp : x[t] * rp;
  }
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    for (std::size_t i = 0; i < p.output_ids.size(); ++i) {
      const std::int32_t count = p.output_counts[i];
      x[p.output_ids[i]] -= static_cast<float>(p.frequency_penalty * count + (count > 0 ? p.presence_penalty : 0.0));
    }
  }
  for (std::int32_t t : p.masked_ids) x[t] = -std::numeric_limits<float>::infinity();
  if (!p.allowed_tokens.empty()) {
    FISSION_CHECK(static_cast<std::int64_t>(p.allowed_tokens.size()) == AllowedWords(vocab), "allowed-token mask of ",
                  p.allowed_tokens.size(), " words for a vocabulary of ", vocab);
    for (std::int64_t i = 0; i < vocab; ++i)
      if (!TokenAllowed(p.allowed_tokens.data(), i)) x[i] = -std::numeric_limits<float>::infinity();
  }
  if (!p.greedy()) {
    const float temperature = static_cast<float>(p.temperature);
    for (std::int64_t i = 0; i < vocab; ++i) x[i] /= temperature;
  }
}

// The candidates a sampled row draws from after top_k, top_p and min_p, into s.order, with their
// unnormalised probabilities in s.probs (indexed by id); returns their total. Candidates are
// ordered by probability then id when a truncation sorted them, else by id.
double Candidates(const float* x, std::int64_t vocab, const SamplingRow& p, HostSamplingScratch& s) {
  float max = -std::numeric_limits<float>::infinity();
  for (std::int64_t i = 0; i < vocab; ++i) max = std::max(max, x[i]);
  s.probs.resize(vocab);
  for (std::int64_t i = 0; i < vocab; ++i) s.probs[i] = std::exp(static_cast<double>(x[i]) - max);
  const double* pr = s.probs.data();
  std::vector<std::int32_t>& order = s.order;
  const std::int64_t k = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  order.resize(vocab);
  std::iota(order.begin(), order.end(), 0);
  const auto more_likely = [pr](std::int32_t a, std::int32_t b) { return pr[a] > pr[b] || (pr[a] == pr[b] && a < b); };
  if (k < vocab) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
    order.resize(k);
  }
  if (p.top_p < 1.0) {
    // The nucleus is a prefix of the candidates sorted by probability. Sorting a short prefix
    // first usually finds it; the full sort is the fallback. Either way the result is the same.
    double total = 0.0;
    for (std::int32_t t : order) total += pr[t];
    const double target = p.top_p * total;
    std::size_t sorted = std::min<std::size_t>(order.size(), 1024);
    std::size_t keep = 0;
    while (true) {
      std::partial_sort(order.begin(), order.begin() + sorted, order.end(), more_likely);
      double cum = 0.0;
      keep = 0;
      while (keep < sorted) {
        cum += pr[order[keep++]];
        if (cum >= target) break;
      }
      if (cum >= target || sorted == order.size()) break;
      sorted = order.size();
    }
    order.resize(std::max<std::size_t>(keep, 1));
  }
  if (p.min_p > 0.0) {
    double max_p = 0.0;
    for (std::int32_t t : order) max_p = std::max(max_p, pr[t]);
    const double threshold = p.min_p * max_p;
    std::erase_if(order, [pr, threshold](std::int32_t t) { return pr[t] < threshold; });
  }
  double total = 0.0;
  for (std::int32_t t : order) total += pr[t];
  return total;
}

// One inverse-CDF draw over the candidates.
std::int32_t Draw(const float* x, std::int64_t vocab, const SamplingRow& p, HostSamplingScratch& s) {
  const double total = Candidates(x, vocab, p, s);
  const double* pr = s.probs.data();
  const double u = UniformFromSeed(p.seed, p.counter) * total;
  double cum = 0.0;
  for (std::int32_t t : s.order) {
    cum += pr[t];
    if (cum > u && pr[t] > 0.0) return t;
  }
  return s.order.back();
}

}  // namespace

SampledToken SampleOnHost(const float* logits, std::int64_t vocab, const SamplingRow& p, HostSamplingScratch& s) {
  FISSION_CHECK(vocab > 0);
  s.x.assign(logits, logits + vocab);
  float* x = s.x.data();
  Prepare(p, vocab, x);

  SampledToken out;
  if (p.forced_token >= 0) {
    FISSION_CHECK(p.forced_token < vocab, "forced token ", p.forced_token, " outside the vocabulary ", vocab);
    out.token = p.forced_token;
  } else if (p.greedy()) {
    for (std::int64_t i = 1; i < vocab; ++i)
      if (x[i] > x[out.token]) out.token = static_cast<std::int32_t>(i);
  } else {
    out.token = Draw(x, vocab, p, s);
  }
  if (p.want_logprob) {
    const double lse = LogSumExp(x, vocab);
    out.logprob = static_cast<float>(static_cast<double>(x[out.token]) - lse);
    TopEntries(x, vocab, lse, p.top_logprobs, s.order, &out);
  }
  return out;
}

SamplingDistribution DistributionOnHost(const float* logits, std::int64_t vocab, const SamplingRow& p,
                                        HostSamplingScratch& s) {
  FISSION_CHECK(vocab > 0 && !p.greedy() && p.forced_token < 0, "DistributionOnHost takes a sampled row");
  s.x.assign(logits, logits + vocab);
  Prepare(p, vocab, s.x.data());
  const double total = Candidates(s.x.data(), vocab, p, s);
  SamplingDistribution d;
  for (std::int32_t t : s.order) {
    if (s.probs[t] <= 0.0) continue;
    d.ids.push_back(t);
    d.probs.push_back(s.probs[t] / total);
  }
  return d;
}

}  // namespace fission::kernels
