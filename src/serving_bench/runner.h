// Drives a benchmark: warm-up, request arrivals (all at once, or gamma-distributed gaps with the
// given burstiness; 1 is a Poisson process), the concurrency limit, and measurement of every
// request through the streaming HTTP client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "serving_bench/backend.h"
#include "serving_bench/metrics.h"
#include "http/url.h"

namespace fission::serving_bench {

struct RunOptions {
  Backend backend;
  http::Url base_url;
  RequestSettings settings;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  std::optional<int> max_concurrency;
  int num_warmups = 1;
  std::uint64_t seed = 1;
  std::vector<http::Header> headers;  // e.g. Authorization
  std::chrono::milliseconds request_timeout{0};
  int client_threads = 1;
  // Called once the warm-up requests are done, before the first measured request.
  std::function<void()> after_warmup;
  // Called about ten times a second with (done, total) while the benchmark runs; may be empty.
  std::function<void(int, int)> progress;
};

struct RunResult {
  std::vector<RequestOutput> outputs;  // in dataset order
  double duration_s = 0;
};

// Arrival offsets in seconds from the start, first at 0. +inf rate: all 0.
std::vector<double> ArrivalTimes(int n, double request_rate, double burstiness, std::uint64_t seed);

// Throws fission::Error when every warm-up request fails (the server is unusable as configured).
RunResult RunBenchmark(const RunOptions& options, const std::vector<DatasetRow>& rows);

}  // namespace fission::serving_bench
