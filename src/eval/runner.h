// Runs gsm8k against an OpenAI-compatible server: greedy generation of at most 256 tokens per
// document, stopping at lm-eval's stop strings, several requests in flight, then both filters and
// exact match, the lm-eval table and the results and per-sample logs.
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

struct EvalOptions {
  http::Url base_url;
  std::string model;
  bool chat = false;  // /v1/chat/completions instead of /v1/completions
  int num_concurrent = 1;
  std::uint32_t seed = 1234;
  int max_gen_toks = kMaxGenTokens;
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
// The generated text of a response body, cut at the first stop string.
std::string ParseEvalResponse(const std::string& body, bool chat);
// Scores already generated responses (exposed for tests).
EvalResult Score(std::vector<SampleResult> samples);
// Throws fission::Error when a request still fails after its retries.
EvalResult RunGsm8k(const EvalOptions& options, const std::vector<Gsm8kRequest>& requests);

std::vector<TableRow> ResultRows(const EvalResult& result, int num_fewshot);
// lm-eval's results layout: results, versions, n-shot, n-samples, config.
Json ResultsJson(const EvalResult& result, const EvalOptions& options, int num_fewshot, int limit, size_t test_size);
// One line of the per-sample log.
Json SampleJson(const SampleResult& sample);

}  // namespace fission::eval
