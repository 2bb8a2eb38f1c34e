// The printed result blocks, byte for byte: sglang.bench_serving's ("Total token throughput",
// "Mean E2E Latency (ms)", sections E2E, TTFT, TPOT, ITL) and vLLM's benchmark_serving's as ATOM
// prints it ("Total Token throughput", "Mean E2EL (ms)", sections TTFT, TPOT, ITL, E2EL). And the
// result JSON: every key sglang.bench_serving writes and every metric key of vLLM's.
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

// sglang's block, from its top rule to its bottom rule, each line ending in '\n'.
std::string FormatResultBlock(const ReportConfig& config, const BenchmarkMetrics& m);
// vLLM's block. Sections default to ttft, tpot, itl and percentiles to 99, as its flags do.
std::string FormatVllmResultBlock(const ReportConfig& config, const BenchmarkMetrics& m);

// Failure counts by reason, printed before the block when some requests failed ("" otherwise).
std::string FormatFailures(const BenchmarkMetrics& m);

// The result object: sglang's keys (the workload arguments and server_info are the caller's),
// vLLM's metric keys (total_token_throughput, mean_e2el_ms, p99_*_ms, ...), failed, goodput and
// the requested percentiles under both namings.
Json ResultJson(const ReportConfig& config, const BenchmarkMetrics& m);

// Python's str() of a float ("inf", "1.0", "2.5"), as bench_serving prints the request rate.
std::string PythonFloat(double v);
// "P99", "P99.9": how vLLM names a percentile.
std::string PercentileName(double p);

}  // namespace fission::serving_bench
