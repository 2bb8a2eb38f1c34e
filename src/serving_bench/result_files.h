// What `fission bench` writes: the JSON line --output-file appends (bench_serving's) and the file
// --save-result writes (vLLM's setup keys, then every key of bench_serving's result, vLLM's metric
// keys and the per-request lists).
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "serving_bench/bench_args.h"
#include "serving_bench/metrics.h"
#include "serving_bench/report.h"

namespace fission::serving_bench {

struct RunFacts {
  std::string model_id;      // the name the requests carried
  std::string tokenizer_id;  // "" without a tokenizer
  size_t num_prompts = 0;
  Json server_info;          // /get_server_info, or null
};

// bench_serving's result object: its argument keys (tag, dataset_name, sharegpt_output_len,
// random_*), server_info and ResultJson's metrics.
Json ResultObject(const BenchArgs& args, const RunFacts& facts, const ReportConfig& config, const BenchmarkMetrics& m);
// The per-request lists: input_lens, output_lens, ttfts, itls, generated_texts, errors.
Json ResultDetails(const std::vector<RequestOutput>& outputs, const BenchmarkMetrics& m);

// Appends `result` (with `details` when --output-details) as one line to --output-file.
void AppendOutputFile(const BenchArgs& args, const Json& result, const Json& details);
// Writes the --save-result file and returns its path.
std::string SaveResultFile(const BenchArgs& args, const RunFacts& facts, const Json& result, const Json& details);

}  // namespace fission::serving_bench
