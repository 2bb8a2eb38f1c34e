#include "serving_bench/stats.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace fission::serving_bench {

Summary::Summary(std::vector<double> values) : sorted_(std::move(values)) {
  std::sort(sorted_.begin(), sorted_.end());
  if (sorted_.empty()) return;
  // Pairwise-free plain sums are enough here: samples are at most a few million latencies.
  double sum = 0;
  for (double v : sorted_) sum += v;
  mean_ = sum / static_cast<double>(sorted_.size());
  double sq = 0;
  for (double v : sorted_) sq += (v - mean_) * (v - mean_);
  std_ = std::sqrt(sq / static_cast<double>(sorted_.size()));
}

double Summary::Percentile(double p) const {
  FISSION_CHECK(p >= 0 && p <= 100, "percentile ", p);
  if (sorted_.empty()) return 0.0;
  const double rank = p / 100.0 * static_cast<double>(sorted_.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, sorted_.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  // numpy's "linear" method: lerp between the two closest ranks.
  return sorted_[lo] + (sorted_[hi] - sorted_[lo]) * frac;
}

Summary Summary::Scaled(double factor) const {
  std::vector<double> v = sorted_;
  for (double& x : v) x *= factor;
  return Summary(std::move(v));
}

}  // namespace fission::serving_bench
