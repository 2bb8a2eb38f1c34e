// The printed result block of bench_serving ("============ Serving Benchmark Result ============"),
// byte for byte: labels left-aligned to 40 columns, values to 10, floats with two decimals, the
// section rules centred in 50 columns. And the result JSON with bench_serving's keys.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "serving_bench/metrics.h"

namespace fission::serving_bench {

struct ReportConfig {
  std::string backend;
  double request_rate = 0;  // +inf: all at once
  std::optional<int> max_concurrency;
  double duration_s = 0;
  bool goodput = false;
  std::optional<double> accept_length;
  // Which sections to print (subset of ttft, tpot, itl, e2el) and which percentiles; empty means
  // bench_serving's fixed layout (E2E P90/P99, TTFT P99, TPOT P99, ITL P95/P99).
  std::vector<std::string> percentile_metrics;
  std::vector<double> metric_percentiles;
};

// The block, from its top rule to its bottom rule, each line ending in '\n'.
std::string FormatResultBlock(const ReportConfig& config, const BenchmarkMetrics& m);

// Failure counts by reason, printed before the block when some requests failed ("" otherwise).
std::string FormatFailures(const BenchmarkMetrics& m);

// The result object (sglang's keys, plus failed, goodput and the requested percentiles).
Json ResultJson(const ReportConfig& config, const BenchmarkMetrics& m);

// Python's str() of a float ("inf", "1.0", "2.5"), as bench_serving prints the request rate.
std::string PythonFloat(double v);
// "P99", "P99.9": how vLLM names a percentile.
std::string PercentileName(double p);

}  // namespace fission::serving_bench
