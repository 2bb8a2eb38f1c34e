#include "server/sampling_params_json.h"

#include <limits>
#include <set>

#include "base/error.h"

namespace fission::server {

using engine::SamplingParams;

std::int32_t ParseTokenId(const Json& v, const std::string& where) {
  if (!v.is_number_integer()) Fail(where, " must be an integer token id, got ", JsonPreview(v));
  const std::optional<std::int64_t> id = ExactInt64(v);
  if (!id || *id < 0 || *id > std::numeric_limits<std::int32_t>::max())
    Fail(where, " must be a token id in [0, 2^31), got ", JsonPreview(v));
  return static_cast<std::int32_t>(*id);
}

std::vector<std::int32_t> ParseTokenIds(const Json& v, const std::string& where) {
  if (!v.is_array()) Fail(where, " must be an array of token ids");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < v.size(); ++i) ids.push_back(ParseTokenId(v[i], StrCat(where, "[", i, "]")));
  return ids;
}

SamplingParams ParseSamplingParamsJson(const Json& object, const std::string& where, SamplingParams p,
                                       std::optional<ConstraintSpec>* constraint) {
  if (!object.is_object()) Fail(where, " must be a JSON object");
  static const std::set<std::string> kKnown = {
      "temperature",       "top_p",          "top_k",          "min_p",           "seed",
      "sampling_seed",     "max_new_tokens", "min_new_tokens", "stop",            "stop_token_ids",
      "ignore_eos",        "n",              "repetition_penalty", "frequency_penalty", "presence_penalty",
      "logprobs",          "top_logprobs",   "prompt_logprobs", "regex",          "ebnf",
      "json_schema",       "structural_tag"};
  for (const auto& [key, value] : object.items())
    if (!kKnown.contains(key)) Fail(where, ": unknown field '", Abbreviate(key), "'");
  std::optional<ConstraintSpec> spec = ReadConstraintFields(object, "sampling_params.", false);
  if (spec && constraint == nullptr)
    Fail(where, ": '", spec->field, "' (structured outputs) is served by `fission serve`, not here");
  if (constraint != nullptr) *constraint = std::move(spec);
  auto int32 = [&](const char* key, std::int32_t fallback) {
    const std::int64_t v = GetInt(object, key, where, fallback);
    if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
      Fail(where, ": field '", key, "' is out of range: ", v);
    return static_cast<std::int32_t>(v);
  };
  p.temperature = GetDouble(object, "temperature", where, p.temperature);
  p.top_p = GetDouble(object, "top_p", where, p.top_p);
  p.top_k = int32("top_k", p.top_k);
  p.min_p = GetDouble(object, "min_p", where, p.min_p);
  for (const char* key : {"seed", "sampling_seed"}) {
    if (const auto seed = GetOptionalInt(object, key, where)) {
      if (*seed < 0) Fail(where, ": field '", key, "' must be >= 0, got ", *seed);
      p.seed = static_cast<std::uint64_t>(*seed);
    }
  }
  p.max_new_tokens = int32("max_new_tokens", p.max_new_tokens);
  p.min_new_tokens = int32("min_new_tokens", p.min_new_tokens);
  if (auto it = object.find("stop"); it != object.end() && !it->is_null()) {
    p.stop.clear();
    if (it->is_string()) {
      p.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (std::size_t i = 0; i < it->size(); ++i) {
        if (!(*it)[i].is_string()) Fail(where, ": field 'stop[", i, "]' must be a string");
        p.stop.push_back((*it)[i].get<std::string>());
      }
    } else {
      Fail(where, ": field 'stop' must be a string or an array of strings");
    }
  }
  if (auto it = object.find("stop_token_ids"); it != object.end() && !it->is_null())
    p.stop_token_ids = ParseTokenIds(*it, StrCat(where, ": field 'stop_token_ids'"));
  p.ignore_eos = GetBool(object, "ignore_eos", where, p.ignore_eos);
  p.n = int32("n", p.n);
  p.repetition_penalty = GetDouble(object, "repetition_penalty", where, p.repetition_penalty);
  p.frequency_penalty = GetDouble(object, "frequency_penalty", where, p.frequency_penalty);
  p.presence_penalty = GetDouble(object, "presence_penalty", where, p.presence_penalty);
  p.logprobs = GetBool(object, "logprobs", where, p.logprobs);
  p.top_logprobs = int32("top_logprobs", p.top_logprobs);
  p.prompt_logprobs = GetBool(object, "prompt_logprobs", where, p.prompt_logprobs);
  return p;
}

}  // namespace fission::server
