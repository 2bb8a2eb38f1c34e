// Prometheus metrics of the server, in the text exposition format at GET /metrics. Names follow
// SGLang's (`sglang:` prefix) so that existing dashboards and alerts keep working; KV pages, which
// SGLang reports only as a ratio, are also given as counts under `fission:`.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace fission::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void Observe(double value);
  // Appends the _bucket, _sum and _count lines of metric `name`.
  void Render(const std::string& name, const std::string& labels, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // the last one is +Inf
  double sum_ = 0.0;
  std::uint64_t count_ = 0;
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  // A request reached the engine (requests refused before it are not counted).
  void RequestStarted();
  // `status` is "success", "error" or "abort".
  void RequestFinished(const std::string& status, std::int64_t prompt_tokens, std::int64_t generation_tokens,
                       double e2e_seconds);
  void FirstToken(double ttft_seconds);
  void InterToken(double seconds);
  // A finished completion's time per output token: its decode time over its tokens after the first.
  void TimePerOutputToken(double seconds);
  // The whole exposition, with gauges read from `engine` and the requests in flight (the
  // service's RequestTracker counts those).
  std::string Render(const engine::Engine& engine, std::int64_t in_flight) const;

 private:
  mutable std::mutex mutex_;
  std::string labels_;
  std::uint64_t requests_total_ = 0;
  std::uint64_t requests_success_ = 0, requests_error_ = 0, requests_abort_ = 0;
  std::uint64_t prompt_tokens_total_ = 0;
  std::uint64_t generation_tokens_total_ = 0;
  Histogram ttft_, itl_, e2e_, tpot_;
  // sglang:gen_throughput: generated tokens per second between scrapes at least a second apart.
  mutable double throughput_ = 0.0;
  mutable std::int64_t last_generated_ = -1;
  mutable std::chrono::steady_clock::time_point last_scrape_;
};

}  // namespace fission::server
