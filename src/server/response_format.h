// Shared pieces of response bodies: finish reasons, usage blocks and logprob entries in the shapes
// OpenAI's API (and SGLang's extensions) use.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "engine/request.h"
#include "server/api_job.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

// "stop", "length", "abort" — or null while unfinished.
Json FinishReasonJson(const ChoiceState& choice);
// matched_stop (SGLang's extension): the stop string or token id, or null.
Json MatchedStopJson(const ChoiceState& choice);
Json UsageJson(const Usage& usage);
// The text of one token as logprob entries show it.
std::string TokenText(const tokenizer::Tokenizer& tokenizer, std::int32_t id);
// Legacy completions logprobs: {tokens, token_logprobs, top_logprobs, text_offset}. `prompt` adds
// the echoed prompt's tokens first (the first one without a logprob).
Json CompletionLogprobsJson(const tokenizer::Tokenizer& tokenizer, const std::vector<std::int32_t>* prompt_ids,
                            const std::vector<engine::TokenLogprob>* prompt_logprobs,
                            const std::vector<engine::TokenLogprob>& logprobs, std::size_t text_offset_base);
// Chat logprobs content entries: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}].
Json ChatLogprobsContentJson(const tokenizer::Tokenizer& tokenizer, const std::vector<engine::TokenLogprob>& logprobs);
// One server-sent event carrying `json`.
std::string SseEvent(const Json& json);
inline const char* kSseDone = "data: [DONE]\n\n";

}  // namespace fission::server
