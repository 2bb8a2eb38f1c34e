// Offline batch inference, the engine side of `fission generate`: prompts from a JSON-lines file
// (or the command line), run to completion, outputs and throughput with prefill and decode split.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "engine/engine.h"

namespace fission::engine {

struct OfflinePrompt {
  std::vector<std::int32_t> prompt_ids;
  SamplingParams params;
};

// Turns text into prompt ids (a tokenizer); null when none is loaded.
using TextEncoder = std::function<std::vector<std::int32_t>(const std::string&)>;

// Reads the fields of a `sampling_params` JSON object over `defaults`. Names are SGLang's
// (temperature, top_p, top_k, min_p, max_new_tokens, min_new_tokens, stop, stop_token_ids,
// ignore_eos, n, repetition_penalty, frequency_penalty, presence_penalty), plus seed (or
// sampling_seed), logprobs, top_logprobs and prompt_logprobs. An unknown field or a wrong type is an
// Error naming `where` and the field.
SamplingParams ParseSamplingParamsJson(const Json& object, const std::string& where, SamplingParams defaults);

// Parses JSON lines: each non-empty line is an object with "input_ids" (array of token ids) or
// "text" (needs `encode`), and optionally "sampling_params". Errors name `source` and the line.
std::vector<OfflinePrompt> ParsePromptsJsonl(const std::string& content, const std::string& source,
                                             const SamplingParams& defaults, const TextEncoder& encode);

// "1,2,3" -> {1, 2, 3}; an Error names `what` on a malformed list.
std::vector<std::int32_t> ParseIdList(const std::string& text, const std::string& what);

// The EOS ids of a checkpoint: generation_config.json's eos_token_id, else config.json's (an int
// or a list); empty when neither file has one.
std::vector<std::int32_t> ReadEosTokenIds(const std::string& model_dir);

struct OfflineCompletion {
  std::vector<std::int32_t> token_ids;
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  std::string error;
  std::vector<TokenLogprob> logprobs;
  std::vector<TokenLogprob> prompt_logprobs;
  std::int32_t cached_tokens = 0;
};

struct OfflineReport {
  std::vector<std::vector<OfflineCompletion>> outputs;  // [prompt][completion index]
  std::int64_t prompt_tokens = 0;
  double seconds = 0.0;
  EngineStats stats;
};

// Submits every prompt and steps the engine until all are done. An invalid prompt is an Error
// naming its index (nothing runs).
OfflineReport RunOffline(Engine& engine, const std::vector<OfflinePrompt>& prompts);

// One JSON object (one line) for a completion: index, completion index, output_ids, text,
// finish_reason, and logprobs when present.
std::string CompletionJson(std::size_t prompt_index, std::size_t completion_index, const OfflineCompletion& c,
                           bool with_text);
// The throughput summary: prefill and decode tokens, seconds and tokens/s.
std::string ThroughputSummary(const OfflineReport& report);

}  // namespace fission::engine
