#include "engine/offline.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "base/error.h"

namespace fission::engine {

namespace {

std::int32_t ToId(const Json& v, const std::string& where) {
  if (!v.is_number_integer()) Fail(where, " must be an integer token id, got ", v.dump());
  const std::int64_t id = v.get<std::int64_t>();
  if (id < 0 || id > std::numeric_limits<std::int32_t>::max()) Fail(where, " must be a token id >= 0, got ", id);
  return static_cast<std::int32_t>(id);
}

std::vector<std::int32_t> IdArray(const Json& v, const std::string& where) {
  if (!v.is_array()) Fail(where, " must be an array of token ids");
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < v.size(); ++i) ids.push_back(ToId(v[i], StrCat(where, "[", i, "]")));
  return ids;
}

Json LogprobJson(const TokenLogprob& lp) {
  Json top = Json::array();
  for (const TopLogprob& t : lp.top) top.push_back({{"token_id", t.token_id}, {"logprob", t.logprob}});
  return {{"token_id", lp.token_id}, {"logprob", lp.logprob}, {"top_logprobs", top}};
}

}  // namespace

SamplingParams ParseSamplingParamsJson(const Json& object, const std::string& where, SamplingParams p) {
  if (!object.is_object()) Fail(where, " must be a JSON object");
  static const std::set<std::string> kKnown = {
      "temperature",       "top_p",          "top_k",          "min_p",           "seed",
      "sampling_seed",     "max_new_tokens", "min_new_tokens", "stop",            "stop_token_ids",
      "ignore_eos",        "n",              "repetition_penalty", "frequency_penalty", "presence_penalty",
      "logprobs",          "top_logprobs",   "prompt_logprobs"};
  for (const auto& [key, value] : object.items())
    if (!kKnown.contains(key)) Fail(where, ": unknown field '", key, "'");
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
    p.stop_token_ids = IdArray(*it, StrCat(where, ": field 'stop_token_ids'"));
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
      prompt.prompt_ids = IdArray(object["input_ids"], StrCat(where, ": field 'input_ids'"));
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

std::vector<std::int32_t> ReadEosTokenIds(const std::string& model_dir) {
  for (const char* name : {"generation_config.json", "config.json"}) {
    const std::string path = model_dir + "/" + name;
    if (!std::filesystem::exists(path)) continue;
    const Json config = ReadJsonFile(path);
    auto it = config.find("eos_token_id");
    if (it == config.end() || it->is_null()) continue;
    if (it->is_array()) return IdArray(*it, StrCat(path, ": field 'eos_token_id'"));
    return {ToId(*it, StrCat(path, ": field 'eos_token_id'"))};
  }
  return {};
}

OfflineReport RunOffline(Engine& engine, const std::vector<OfflinePrompt>& prompts) {
  OfflineReport report;
  report.outputs.resize(prompts.size());
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    report.outputs[i].resize(prompts[i].params.n);
    report.prompt_tokens += static_cast<std::int64_t>(prompts[i].prompt_ids.size());
    Request request;
    request.prompt_ids = prompts[i].prompt_ids;
    request.params = prompts[i].params;
    std::vector<OfflineCompletion>* slot = &report.outputs[i];
    request.callback = [slot](const RequestOutput& out) {
      OfflineCompletion& c = (*slot)[out.index];
      c.token_ids.insert(c.token_ids.end(), out.token_ids.begin(), out.token_ids.end());
      c.text += out.text;
      c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
      c.prompt_logprobs.insert(c.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
      c.cached_tokens = out.cached_tokens;
      if (out.finished) {
        c.finish_reason = out.finish_reason;
        c.error = out.error;
      }
    };
    try {
      ids.push_back(engine.Submit(std::move(request)));
    } catch (const Error& e) {
      for (std::int64_t id : ids) engine.Abort(id);
      engine.RunUntilIdle();
      Fail("prompt ", i, ": ", e.what());
    }
  }
  engine.RunUntilIdle();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.stats = engine.stats();
  return report;
}

std::string CompletionJson(std::size_t prompt_index, std::size_t completion_index, const OfflineCompletion& c,
                           bool with_text) {
  Json out = {{"index", prompt_index},
              {"completion", completion_index},
              {"output_ids", c.token_ids},
              {"finish_reason", std::string(FinishReasonName(c.finish_reason))},
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

std::string ThroughputSummary(const OfflineReport& report) {
  const EngineStats& s = report.stats;
  auto rate = [](double tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  char buffer[768];
  std::snprintf(buffer, sizeof(buffer),
                "requests: %zu, prompt tokens: %lld (computed %lld, from the prefix cache %lld), generated tokens: %lld\n"
                "prefill: %lld tokens in %.3f s, %.1f tokens/s (steps with prompt work)\n"
                "decode:  %lld tokens in %.3f s, %.1f tokens/s (steps with decode work only)\n"
                "total:   %.3f s, %.1f generated tokens/s, %lld steps, %lld preemptions\n",
                report.outputs.size(), static_cast<long long>(report.prompt_tokens),
                static_cast<long long>(s.computed_prompt_tokens), static_cast<long long>(s.prefix_hit_tokens),
                static_cast<long long>(s.generated_tokens), static_cast<long long>(s.computed_prompt_tokens),
                s.prefill_seconds, rate(static_cast<double>(s.computed_prompt_tokens), s.prefill_seconds),
                static_cast<long long>(s.decode_only_tokens), s.decode_seconds,
                rate(static_cast<double>(s.decode_only_tokens), s.decode_seconds), report.seconds,
                rate(static_cast<double>(s.generated_tokens), report.seconds), static_cast<long long>(s.steps),
                static_cast<long long>(s.preemptions));
  return buffer;
}

}  // namespace fission::engine
