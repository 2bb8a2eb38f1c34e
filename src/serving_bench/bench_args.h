// `fission bench`'s command line: sglang.bench_serving's flags (and those of vLLM's
// benchmark_serving that recipes pass), their defaults and their checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/json.h"
#include "serving_bench/metrics.h"

namespace fission::serving_bench {

// Which printed block: sglang.bench_serving's, or the one of vLLM's benchmark_serving (as ATOM
// prints it).
enum class ReportFormat { kSglang, kVllm };

struct BenchArgs {
  std::string backend = "sglang";
  std::string base_url, host = "127.0.0.1";
  std::optional<int> port;
  std::string model, served_model_name, tokenizer;
  // random, random-ids, sharegpt, generated-shared-prefix or jsonl.
  std::string dataset_name = "random", dataset_path;
  int num_prompts = 1000;
  long long input_len = 1024, output_len = 1024, prefix_len = 0;
  double range_ratio = 0.0;
  std::optional<long long> sharegpt_output_len, sharegpt_context_len;
  int gsp_num_groups = 64, gsp_prompts_per_group = 16;
  long long gsp_system_prompt_len = 2048, gsp_question_len = 128, gsp_output_len = 256;
  double gsp_range_ratio = 1.0;
  bool gsp_ordered = false;
  bool apply_chat_template = false;
  bool tokenize_prompt = false;
  std::string save_dataset;  // write the prompts as token-id JSON lines
  std::uint32_t seed = 1;
  double request_rate = std::numeric_limits<double>::infinity(), burstiness = 1.0;
  std::optional<int> max_concurrency;
  int num_warmups = 1;
  std::optional<bool> ignore_eos;
  bool stream = true;
  Json extra = Json::object();
  std::vector<std::string> lora_names;
  bool profile = false;
  ReportFormat report_format = ReportFormat::kSglang;
  std::vector<std::string> percentile_metrics;  // empty: the format's default sections
  std::vector<double> metric_percentiles;
  Goodput goodput;
  std::string output_file;
  bool output_details = false;
  bool save_result = false;
  std::string result_dir, result_filename;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::string tag;
  bool progress = true;
  // A burst of tokens from many streams is stamped faster by several threads; leave cores to a
  // server on the same host.
  int client_threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency() / 4, 1u, 4u));
  bool help = false;
};

// Bad flags throw fission::Error naming the flag and the value.
BenchArgs ParseBenchArgs(const std::vector<std::string>& argv);

// The --help text.
const char* BenchUsage();

}  // namespace fission::serving_bench
