// Summary statistics with numpy's conventions, so that numbers match the Python tools: population
// standard deviation (ddof = 0) and percentiles by linear interpolation between closest ranks.
// An empty sample summarises to zeros, as bench_serving does with `np.mean(x or 0)`.
#pragma once

#include <vector>

namespace fission::serving_bench {

class Summary {
 public:
  Summary() = default;
  explicit Summary(std::vector<double> values);

  bool empty() const { return sorted_.empty(); }
  std::size_t size() const { return sorted_.size(); }
  double mean() const { return mean_; }
  double std() const { return std_; }
  double median() const { return Percentile(50); }
  double max() const { return sorted_.empty() ? 0.0 : sorted_.back(); }
  // p in [0, 100].
  double Percentile(double p) const;
  // Every value multiplied by `factor` (seconds to milliseconds).
  Summary Scaled(double factor) const;

 private:
  std::vector<double> sorted_;
  double mean_ = 0;
  double std_ = 0;
};

}  // namespace fission::serving_bench
