// Offline batch inference, the engine side of `fission generate`: prompts run to completion,
// outputs and throughput with prefill and decode split (server/generate_io.h reads and writes
// their JSON lines).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace fission::engine {

struct OfflinePrompt {
  std::vector<std::int32_t> prompt_ids;
  SamplingParams params;
};

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
// naming its index (nothing runs). The report's counters (steps, tokens, seconds) are this run's
// alone, so an engine that ran before (a warm-up) reports only what this run did.
OfflineReport RunOffline(Engine& engine, const std::vector<OfflinePrompt>& prompts);

// The throughput summary: prefill and decode tokens, seconds and tokens/s.
std::string ThroughputSummary(const OfflineReport& report);

}  // namespace fission::engine
