// Per-request measurements and the benchmark metrics computed from them, with bench_serving's
// definitions (TTFT, TPOT over requests with more than one output token, ITL pooled over all
// gaps, E2E latency, throughputs over the wall time, concurrency, peak output tokens per second)
// and goodput as `vllm bench serve` defines it. The peak of concurrent requests is the largest
// number of requests in flight at one instant (bench_serving counts every request that overlaps
// a one-second bucket, which exceeds --max-concurrency when requests are short).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "serving_bench/stats.h"

namespace fission::tokenizer {
class Tokenizer;
}

namespace fission::serving_bench {

struct DatasetRow {
  std::string prompt;
  std::int64_t prompt_len = 0;
  std::int64_t output_len = 0;
  // Token-id prompts (a JSON-lines dataset of ids, or --tokenize-prompt) are sent as these ids
  // instead of the text.
  std::vector<std::int32_t> prompt_ids;
  std::string lora_name;  // the adapter this request names (--lora-name); empty: none
};

// One request as measured by the client. Times are seconds.
struct RequestOutput {
  bool success = false;
  std::string error;
  std::string generated_text;
  double start_time = 0;  // since the benchmark started
  double ttft = 0;
  double latency = 0;
  std::vector<double> itl;
  std::int64_t prompt_len = 0;
  // completion_tokens of the usage block; absent when the server sent none.
  std::optional<std::int64_t> usage_output_tokens;
  // Chunks that carried text (a fallback count when there is neither usage nor tokenizer).
  std::int64_t token_chunks = 0;
};

// SLOs in milliseconds; a request is good when it meets every one that is set.
struct Goodput {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool enabled() const { return ttft_ms || tpot_ms || e2el_ms; }
};

struct BenchmarkMetrics {
  int completed = 0;
  int failed = 0;
  std::map<std::string, int> failure_reasons;  // error text -> count
  std::int64_t total_input = 0;
  std::int64_t total_output = 0;
  std::int64_t total_output_retokenized = 0;
  std::vector<std::int64_t> output_lens;  // per request, 0 for failures
  int good_completed = 0;
  double request_throughput = 0;
  double request_goodput = 0;
  double input_throughput = 0;
  double output_throughput = 0;
  double total_throughput = 0;
  double max_output_tokens_per_s = 0;
  int max_concurrent_requests = 0;
  double concurrency = 0;
  // In milliseconds.
  Summary ttft_ms, tpot_ms, itl_ms, e2e_ms;
};

// `tokenizer` counts output tokens when a response carried no usage block and gives the
// "retokenized" total; without one, the usage count (or the number of text chunks) stands in.
BenchmarkMetrics CalculateMetrics(const std::vector<RequestOutput>& outputs, double duration_s,
                                  const tokenizer::Tokenizer* tokenizer, const Goodput& goodput);

}  // namespace fission::serving_bench
