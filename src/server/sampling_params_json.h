// SGLang's `sampling_params` object and token-id arrays as the server's /generate route and
// `fission generate`'s JSON lines carry them, read into the engine's native types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"
#include "engine/sampling_params.h"
#include "server/constraint_spec.h"

namespace fission::server {

// A token id (an integer in [0, 2^31)); an Error names `where` otherwise.
std::int32_t ParseTokenId(const Json& v, const std::string& where);
// An array of token ids; an Error names `where` and the bad element.
std::vector<std::int32_t> ParseTokenIds(const Json& v, const std::string& where);

// Reads the fields of a `sampling_params` JSON object over `defaults`. Names are SGLang's
// (temperature, top_p, top_k, min_p, max_new_tokens, min_new_tokens, stop, stop_token_ids,
// ignore_eos, n, repetition_penalty, frequency_penalty, presence_penalty), plus seed (or
// sampling_seed), logprobs, top_logprobs and prompt_logprobs. An unknown field or a wrong type is an
// Error naming `where` and the field. SGLang's constraint fields (regex, ebnf, json_schema) land in
// `*constraint`; without one to take them they are an Error (fission generate does not
// constrain).
engine::SamplingParams ParseSamplingParamsJson(const Json& object, const std::string& where,
                                               engine::SamplingParams defaults,
                                               std::optional<ConstraintSpec>* constraint = nullptr);

}  // namespace fission::server
