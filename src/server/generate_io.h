// `fission generate`'s inputs and outputs: JSON-lines prompts in the /generate request's format,
// --prompt-ids lists, and one JSON line per completion.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/offline.h"

namespace fission::server {

// Turns text into prompt ids (a tokenizer); null when none is loaded.
using TextEncoder = std::function<std::vector<std::int32_t>(const std::string&)>;

// Parses JSON lines: each non-empty line is an object with "input_ids" (array of token ids) or
// "text" (needs `encode`), and optionally "sampling_params". Errors name `source` and the line.
std::vector<engine::OfflinePrompt> ParsePromptsJsonl(const std::string& content, const std::string& source,
                                                     const engine::SamplingParams& defaults,
                                                     const TextEncoder& encode);

// "1,2,3" -> {1, 2, 3}; an Error names `what` on a malformed list.
std::vector<std::int32_t> ParseIdList(const std::string& text, const std::string& what);

// One JSON object (one line) for a completion: index, completion index, output_ids, text,
// finish_reason, and logprobs when present.
std::string CompletionJson(std::size_t prompt_index, std::size_t completion_index,
                           const engine::OfflineCompletion& c, bool with_text);

}  // namespace fission::server
