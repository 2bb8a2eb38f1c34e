#include "serving_bench/backend.h"

#include "base/error.h"
#include "http/sse.h"

namespace fission::serving_bench {

Backend Backend::Parse(const std::string& name) {
  Backend b;
  b.name = name;
  if (name == "sglang" || name == "sglang-native") {
    b.api = ApiKind::kSglangGenerate;
  } else if (name == "sglang-oai" || name == "vllm" || name == "openai" || name == "lmdeploy") {
    b.api = ApiKind::kCompletions;
  } else if (name == "openai-chat" || name == "sglang-oai-chat" || name == "vllm-chat" || name == "lmdeploy-chat") {
    b.api = ApiKind::kChatCompletions;
  } else {
    fission::Fail("--backend: unknown backend '", name,
                  "' (known: sglang, sglang-native, sglang-oai, sglang-oai-chat, vllm, vllm-chat, openai, "
                  "openai-chat, lmdeploy, lmdeploy-chat)");
  }
  return b;
}

std::string Backend::Path() const {
  switch (api) {
    case ApiKind::kCompletions:
      return "/v1/completions";
    case ApiKind::kChatCompletions:
      return "/v1/chat/completions";
    case ApiKind::kSglangGenerate:
      return "/generate";
  }
  return "";
}

namespace {

// The prompt as the API takes it: token ids when the row has them, else the text.
Json PromptValue(const DatasetRow& row) {
  if (row.prompt_ids.empty()) return row.prompt;
  return Json(row.prompt_ids);
}

}  // namespace

std::string BuildRequestBody(const Backend& backend, const RequestSettings& s, const DatasetRow& row) {
  Json body;
  switch (backend.api) {
    case ApiKind::kCompletions:
      body = {{"model", s.model}, {"prompt", PromptValue(row)}, {"temperature", 0.0}, {"best_of", 1},
              {"max_tokens", row.output_len}, {"stream", s.stream}, {"ignore_eos", s.ignore_eos}};
      if (s.stream) body["stream_options"] = {{"include_usage", true}};
      break;
    case ApiKind::kChatCompletions:
      if (!row.prompt_ids.empty()) fission::Fail("token-id prompts need a completions backend, not ", backend.name);
      body = {{"model", s.model},
              {"messages", Json::array({{{"role", "user"}, {"content", row.prompt}}})},
              {"temperature", 0.0},
              {"max_tokens", row.output_len},
              {"stream", s.stream},
              {"ignore_eos", s.ignore_eos}};
      if (s.stream) body["stream_options"] = {{"include_usage", true}};
      break;
    case ApiKind::kSglangGenerate:
      body = {{row.prompt_ids.empty() ? "text" : "input_ids", PromptValue(row)},
              {"sampling_params",
               {{"temperature", 0.0}, {"max_new_tokens", row.output_len}, {"ignore_eos", s.ignore_eos}}},
              {"stream", s.stream}};
      break;
  }
  // bench_serving names the adapter as the model and as lora_path on the OpenAI routes, and as
  // lora_path on /generate.
  if (!row.lora_name.empty()) {
    if (backend.api != ApiKind::kSglangGenerate) body["model"] = row.lora_name;
    body["lora_path"] = row.lora_name;
  }
  for (const auto& [key, value] : s.extra_body.items()) body[key] = value;
  return body.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StreamMeasurer::StreamMeasurer(const Backend& backend, bool stream, http::Clock::time_point sent,
                               std::int64_t prompt_len)
    : backend_(backend), stream_(stream), sent_(sent) {
  out_.prompt_len = prompt_len;
}

void StreamMeasurer::Fail(std::string error) {
  if (out_.error.empty()) out_.error = std::move(error);
}

void StreamMeasurer::OnStatus(int status) { status_ = status; }

void StreamMeasurer::OnData(std::string_view data, http::Clock::time_point when) {
  if (status_ != 200 || !stream_) {
    if (body_.size() < (16u << 20)) body_.append(data);
    return;
  }
  // Lines, as aiohttp's content iterator yields them.
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(data);
      return;
    }
    partial_.append(data.substr(0, nl));
    data.remove_prefix(nl + 1);
    std::string line = std::move(partial_);
    partial_.clear();
    OnLine(line, when);
  }
}

void StreamMeasurer::OnLine(std::string_view line, http::Clock::time_point when) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.empty() || line.front() == ':') return;  // keep-alive comment
  std::string_view payload = http::SseData(line).value_or(line);
  last_line_ = when;
  any_line_ = true;
  if (payload == "[DONE]") return;
  Json data;
  try {
    data = Json::parse(payload);
  } catch (const Json::exception&) {
    Fail("malformed stream chunk: " + std::string(payload.substr(0, 200)));
    return;
  }
  OnEvent(data, when);
}

void StreamMeasurer::OnTextChunk(http::Clock::time_point when, std::int64_t new_tokens) {
  out_.token_chunks++;
  if (!got_text_) {
    got_text_ = true;
    out_.ttft = Since(when);
  } else {
    const double gap = std::chrono::duration<double>(when - last_token_).count();
    const std::int64_t n = std::max<std::int64_t>(new_tokens, 1);
    for (std::int64_t i = 0; i < n; ++i) out_.itl.push_back(gap / static_cast<double>(n));
  }
  last_token_ = when;
}

void StreamMeasurer::OnEvent(const Json& data, http::Clock::time_point when) {
  if (!data.is_object()) {
    Fail("stream chunk is not a JSON object");
    return;
  }
  if (auto err = data.find("error"); err != data.end() && !err->is_null()) {
    const Json& e = *err;
    Fail("server error in stream: " + (e.is_object() && e.contains("message") && e["message"].is_string()
                                           ? e["message"].get<std::string>()
                                           : e.dump(-1, ' ', false, Json::error_handler_t::replace)));
    return;
  }
  if (backend_.api == ApiKind::kSglangGenerate) {
    // Cumulative text; meta_info.completion_tokens says how many tokens it holds.
    auto text = data.find("text");
    if (text == data.end() || !text->is_string() || text->get_ref<const std::string&>().empty()) return;
    std::int64_t tokens = sglang_tokens_;
    if (auto meta = data.find("meta_info"); meta != data.end() && meta->is_object()) {
      if (auto ct = meta->find("completion_tokens"); ct != meta->end() && ct->is_number_integer()) {
        tokens = ct->get<std::int64_t>();
      }
    }
    const std::int64_t new_tokens = tokens - sglang_tokens_;
    if (got_text_ && new_tokens <= 0) return;  // no progress: not a token chunk
    out_.generated_text = text->get<std::string>();
    out_.usage_output_tokens = tokens;
    sglang_tokens_ = tokens;
    OnTextChunk(when, new_tokens);
    return;
  }
  if (auto usage = data.find("usage"); usage != data.end() && usage->is_object()) {
    if (auto ct = usage->find("completion_tokens"); ct != usage->end() && ct->is_number_integer()) {
      out_.usage_output_tokens = ct->get<std::int64_t>();
    }
  }
  auto choices = data.find("choices");
  if (choices == data.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return;
  const Json& choice = (*choices)[0];
  std::string text;
  if (backend_.api == ApiKind::kCompletions) {
    if (auto t = choice.find("text"); t != choice.end() && t->is_string()) text = t->get<std::string>();
  } else {
    // As bench_serving: only `delta.content` is a token; reasoning_content chunks are not.
    if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
      if (auto t = delta->find("content"); t != delta->end() && t->is_string()) text = t->get<std::string>();
    }
  }
  if (text.empty()) return;
  out_.generated_text += text;
  OnTextChunk(when, 1);
}

RequestOutput StreamMeasurer::Finish(const std::string& transport_error, http::Clock::time_point when) {
  if (!transport_error.empty()) {
    Fail(transport_error);
  } else if (status_ != 200) {
    std::string detail = body_.substr(0, 200);
    Fail(StrCat("HTTP ", status_, detail.empty() ? "" : ": ", detail));
  } else if (!stream_) {
    // One JSON answer: TTFT is the whole latency.
    try {
      const Json data = Json::parse(body_);
      const Json& choice = data.at("choices").at(0);
      if (backend_.api == ApiKind::kChatCompletions) {
        out_.generated_text = choice.at("message").value("content", "");
      } else if (backend_.api == ApiKind::kCompletions) {
        out_.generated_text = choice.value("text", "");
      }
      if (data.contains("usage") && data["usage"].is_object() && data["usage"].contains("completion_tokens")) {
        out_.usage_output_tokens = data["usage"]["completion_tokens"].get<std::int64_t>();
      }
      got_text_ = true;
      out_.token_chunks = 1;
      out_.ttft = out_.latency = Since(when);
    } catch (const std::exception& e) {
      if (backend_.api == ApiKind::kSglangGenerate) {
        try {
          const Json data = Json::parse(body_);
          out_.generated_text = data.at("text").get<std::string>();
          out_.usage_output_tokens = data.at("meta_info").at("completion_tokens").get<std::int64_t>();
          got_text_ = true;
          out_.token_chunks = 1;
          out_.ttft = out_.latency = Since(when);
        } catch (const std::exception& e2) {
          Fail(StrCat("malformed response: ", e2.what()));
        }
      } else {
        Fail(StrCat("malformed response: ", e.what()));
      }
    }
  } else {
    if (!partial_.empty()) {
      std::string line = std::move(partial_);
      partial_.clear();
      OnLine(line, when);
    }
    if (!got_text_) {
      Fail(backend_.api == ApiKind::kChatCompletions
               ? "no chunk with delta.content arrived (reasoning_content is not counted, as in bench_serving)"
               : "no chunk with text arrived");
    }
    out_.latency = Since(any_line_ ? last_line_ : when);
  }
  out_.success = out_.error.empty();
  return std::move(out_);
}

}  // namespace fission::serving_bench
