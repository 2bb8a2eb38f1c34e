// The files lm-eval writes for a run, in its layout and format: the results JSON (results,
// group_subtasks, configs, versions, n-shot, higher_is_better, n-samples, config, the run's
// tracker fields) and, with --log_samples, one sample line per document and filter with the doc,
// prompt and target hashes.
//
// Paths (lm-eval's EvaluationTracker): --output_path X.json gives X_<date>.json, and samples
// beside it; any other X gives X/<model>/results_<date>.json and X/<model>/samples_gsm8k_<date>.jsonl,
// <model> being the model_args' model= value with "/", ":" and the like replaced by "__", and
// <date> datetime.now().isoformat() with ":" as "-".
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/runner.h"

namespace fission::eval {

struct RunRecord {
  std::string model_type;     // lm-eval's --model: local-completions or local-chat-completions
  std::string model_args;     // as given, or the one Fission's spelling stands for
  std::string batch_size = "1";
  nlohmann::ordered_json limit = nullptr;
  nlohmann::ordered_json cli_gen_kwargs = nullptr;  // --gen_kwargs as parsed, or null
  nlohmann::ordered_json request_kwargs;            // what each request's arguments recorded
  int num_fewshot = 5;
  std::uint32_t fewshot_seed = 1234;
  bool chat = false;
  bool multiturn = false;
  size_t test_size = 0;
  double start_time = 0, end_time = 0;  // seconds of a monotonic clock
};

struct OutputPaths {
  std::string results;
  std::string samples;
};

// lm-eval's model name of a model_args string (the value after "pretrained=", "model=", ...).
std::string ModelNameOf(const std::string& model_args);
// lm-eval's sanitize_model_name.
std::string SanitizeModelName(const std::string& name);
// datetime.now().isoformat().replace(":", "-").
std::string DateId();
OutputPaths LmEvalOutputPaths(const std::string& output_path, const std::string& model_args, const std::string& date);

// One sample object per (filter, document): strict-match's, then flexible-extract's.
std::vector<nlohmann::ordered_json> SampleObjects(const EvalResult& result, const RunRecord& run);
// The results object; `samples` (may be empty) give the task hash.
nlohmann::ordered_json ResultsObject(const EvalResult& result, const RunRecord& run,
                                     const std::vector<nlohmann::ordered_json>& samples);

// Writes the results (and the samples when `log_samples`); errors name the path.
OutputPaths WriteOutputs(const std::string& output_path, const EvalResult& result, const RunRecord& run,
                         bool log_samples);

}  // namespace fission::eval
