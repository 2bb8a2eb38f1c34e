#include "server/generate_io.h"

#include <charconv>
#include <sstream>

#include "base/error.h"
#include "server/sampling_params_json.h"

namespace fission::server {

using engine::FinishReason;
using engine::OfflineCompletion;
using engine::OfflinePrompt;
using engine::SamplingParams;
using engine::TokenLogprob;
using engine::TopLogprob;

namespace {

Json LogprobJson(const TokenLogprob& lp) {
  Json top = Json::array();
  for (const TopLogprob& t : lp.top) top.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}});
  return {{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top_logprobs", top}};
}

}  // namespace

std::vector<OfflinePrompt> ParsePromptsJsonl(const std::string& content, const std::string& source,
                                             const SamplingParams& defaults, const TextEncoder& encode) {
  std::vector<OfflinePrompt> prompts;
  std::istringstream in(content);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = StrCat(source, " line ", number);
    const Json object = ParseJson(line, where);
    if (!object.is_object()) Fail(where, ": expected a JSON object");
    for (const auto& [key, value] : object.items())
      if (key != "input_ids" && key != "text" && key != "sampling_params")
        Fail(where, ": unknown field '", key, "' (expected input_ids, text, sampling_params)");
    OfflinePrompt prompt;
    const bool has_ids = object.contains("input_ids"), has_text = object.contains("text");
    if (has_ids == has_text) Fail(where, ": give exactly one of 'input_ids' and 'text'");
    if (has_ids) {
      prompt.prompt_ids = ParseTokenIds(object["input_ids"], StrCat(where, ": field 'input_ids'"));
    } else {
      if (!object["text"].is_string()) Fail(where, ": field 'text' must be a string");
      if (!encode) Fail(where, ": a 'text' prompt needs a tokenizer (--tokenizer-path, or one in --model-path)");
      prompt.prompt_ids = encode(object["text"].get<std::string>());
    }
    prompt.params = object.contains("sampling_params")
                        ? ParseSamplingParamsJson(object["sampling_params"], StrCat(where, ": sampling_params"), defaults)
                        : defaults;
    prompts.push_back(std::move(prompt));
  }
  return prompts;
}

std::vector<std::int32_t> ParseIdList(const std::string& text, const std::string& what) {
  std::vector<std::int32_t> ids;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    const std::size_t a = item.find_first_not_of(' '), b = item.find_last_not_of(' ');
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    std::int32_t id = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || id < 0)
      Fail(what, " must be a comma-separated list of token ids, got '", text, "'");
    ids.push_back(id);
    start = end + 1;
  }
  return ids;
}

std::string CompletionJson(std::size_t prompt_index, std::size_t completion_index, const OfflineCompletion& c,
                           bool with_text) {
  Json out = {{"index", prompt_index},
              {"completion", completion_index},
              {"output_ids", c.token_ids},
              {"finish_reason", std::string(engine::FinishReasonName(c.finish_reason))},
              {"cached_tokens", c.cached_tokens}};
  if (with_text) out["text"] = c.text;
  if (!c.error.empty()) out["error"] = c.error;
  if (!c.logprobs.empty()) {
    Json lps = Json::array();
    for (const TokenLogprob& lp : c.logprobs) lps.push_back(LogprobJson(lp));
    out["logprobs"] = lps;
  }
  if (!c.prompt_logprobs.empty()) {
    Json lps = Json::array();
    for (const TokenLogprob& lp : c.prompt_logprobs) lps.push_back(LogprobJson(lp));
    out["prompt_logprobs"] = lps;
  }
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace fission::server
