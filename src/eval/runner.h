// Runs gsm8k against an OpenAI-compatible server: one greedy generation per document, stopping at
// the stop strings, several requests in flight, then both filters and exact match.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "eval/gsm8k.h"
#include "eval/table.h"
#include "http/message.h"
#include "http/url.h"

namespace fission::eval {

// The generation fields of every request, as lm-eval's API models build them from the task's
// generation kwargs and --gen_kwargs.
struct GenerationSettings {
  int max_tokens = kMaxGenTokens;
  double temperature = 0.0;
  std::vector<std::string> stop = Gsm8kStops();
  std::int64_t seed = 1234;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // other kwargs, sent as they are
};

struct EvalOptions {
  http::Url base_url;
  std::string path = "/v1/completions";  // or /v1/chat/completions, or model_args base_url's path
  std::string model;
  bool chat = false;  // messages instead of a prompt
  int num_concurrent = 1;
  GenerationSettings generation;
  int max_retries = 3;
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  std::vector<http::Header> headers;
  std::function<void(int, int)> progress;  // (done, total), about ten times a second
};

struct SampleResult {
  Gsm8kRequest request;
  std::string response;
  std::string strict;    // extracted by strict-match
  std::string flexible;  // extracted by flexible-extract
  bool strict_correct = false;
  bool flexible_correct = false;
};

struct FilterScore {
  double value = 0;
  std::optional<double> stderr_value;  // standard error of the mean; none for one sample
};

struct EvalResult {
  std::vector<SampleResult> samples;  // in document order
  FilterScore strict;
  FilterScore flexible;
};

// The request body for one document.
Json BuildEvalRequest(const EvalOptions& options, const Gsm8kRequest& request);
// The generated text of a response body, cut at the first of `stops`.
std::string ParseEvalResponse(const std::string& body, bool chat, const std::vector<std::string>& stops);
// Scores already generated responses (exposed for tests).
EvalResult Score(std::vector<SampleResult> samples);
// Throws fission::Error when a request still fails after its retries.
EvalResult RunGsm8k(const EvalOptions& options, const std::vector<Gsm8kRequest>& requests);

std::vector<TableRow> ResultRows(const EvalResult& result, int num_fewshot);

}  // namespace fission::eval
