// `fission eval`'s command line, in its own spelling (--base-url, --data-dir, ...) or in
// lm-eval's as users type it for gsm8k: --model local-completions|local-chat-completions
// --model_args base_url=...,model=...,num_concurrent=N,tokenized_requests=False --tasks gsm8k
// --num_fewshot N --gen_kwargs ... --batch_size ... --log_samples --output_path ...
// --apply_chat_template --fewshot_as_multiturn.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fission::eval {

struct EvalArgs {
  std::string base_url = "http://127.0.0.1:30000";  // --base-url: the server's root
  std::string endpoint_url;  // model_args base_url: the full completions URL, as lm-eval posts to it
  std::string model;         // the served model name
  std::string model_type;    // lm-eval's --model (local-completions, ...); empty in Fission's spelling
  std::string model_args;    // --model_args as given, printed and recorded verbatim
  std::string data_dir;      // train.jsonl and test.jsonl; else $FISSION_GSM8K_DIR
  std::optional<int> num_fewshot;  // unset: the task's 5
  std::optional<double> limit;     // a count, or a fraction of the test split when below 1
  int num_concurrent = 1;
  int max_retries = 3;
  double timeout_s = 600;
  std::uint32_t fewshot_seed = 1234;
  std::int64_t request_seed = 1234;  // the "seed" field of requests (model_args seed)
  int max_gen_toks = 256;
  std::string eos_string;            // appended to the stops of completion requests
  std::string gen_kwargs_text;       // --gen_kwargs as given
  nlohmann::ordered_json gen_kwargs = nullptr;
  std::string batch_size = "1";
  bool chat = false;
  bool multiturn = false;
  std::string output_path;
  bool log_samples = false;
  std::optional<double> threshold;
  bool progress = true;
  bool help = false;

  int Fewshot() const { return num_fewshot.value_or(5); }
};

// Bad flags, model_args or gen_kwargs throw fission::Error naming the flag and the value.
EvalArgs ParseEvalArgs(const std::vector<std::string>& argv);

const char* EvalUsage();

}  // namespace fission::eval
