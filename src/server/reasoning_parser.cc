#include "server/reasoning_parser.h"

#include <utility>

#include "base/error.h"
#include "server/text_scan.h"

namespace fission::server {

ReasoningStream::ReasoningStream(Options options) : options_(std::move(options)), state_(State::kOpening) {
  FISSION_CHECK(!options_.think_start.empty() && !options_.think_end.empty());
}

ReasoningDelta ReasoningStream::Feed(std::string_view delta) {
  FISSION_CHECK(!finished_, "ReasoningStream fed after Finish");
  buffer_.append(delta);
  ReasoningDelta out;
  Step(/*at_end=*/false, &out);
  return out;
}

ReasoningDelta ReasoningStream::Finish() {
  ReasoningDelta out;
  if (finished_) return out;
  Step(/*at_end=*/true, &out);
  out.reasoning += held_reasoning_;
  held_reasoning_.clear();
  finished_ = true;
  return out;
}

void ReasoningStream::EmitReasoning(std::string_view text, ReasoningDelta* out) {
  if (options_.stream_reasoning) {
    out->reasoning.append(text);
  } else {
    held_reasoning_.append(text);
  }
}

void ReasoningStream::Step(bool at_end, ReasoningDelta* out) {
  const std::string_view start = options_.think_start;
  const std::string_view end = options_.think_end;
  const std::string_view tool = options_.tool_start;
  if (state_ == State::kOpening) {
    // The output may open with whitespace and `<think>` (repeated, as some models echo the tag the
    // template already wrote). Whitespace before the tag is dropped with it.
    while (true) {
      const std::size_t space = LeadingSpace(buffer_);
      const std::string_view rest = std::string_view(buffer_).substr(space);
      if (rest.substr(0, start.size()) == start) {
        buffer_.erase(0, space + start.size());
        options_.in_reasoning = true;
        continue;
      }
      if (!at_end && start.substr(0, rest.size()) == rest) return;  // maybe the tag, still arriving
      break;
    }
    state_ = options_.in_reasoning ? State::kReasoning : State::kContent;
  }
  if (state_ == State::kReasoning) {
    std::size_t which = 0;
    const std::size_t at = FindFirstOf(buffer_, {end, tool}, 0, &which);
    if (at == std::string::npos) {
      const std::size_t keep = at_end ? 0 : PartialTagSuffix(buffer_, {end, tool});
      EmitReasoning(std::string_view(buffer_).substr(0, buffer_.size() - keep), out);
      buffer_.erase(0, buffer_.size() - keep);
      return;
    }
    EmitReasoning(std::string_view(buffer_).substr(0, at), out);
    out->reasoning += held_reasoning_;
    held_reasoning_.clear();
    // `</think>` is consumed; a tool-call start stays in the content for the tool-call parser.
    buffer_.erase(0, which == 0 ? at + end.size() : at);
    state_ = State::kContent;
  }
  out->content += buffer_;
  buffer_.clear();
}

const std::vector<std::string>& ReasoningParser::Names() {
  static const std::vector<std::string> names = {"deepseek-r1", "deepseek-v3", "deepseek-v4", "glm45", "qwen3"};
  return names;
}

ReasoningParser::ReasoningParser(std::string name, std::string tool_start, Default mode)
    : name_(std::move(name)), tool_start_(std::move(tool_start)), default_(mode) {}

std::unique_ptr<ReasoningParser> ReasoningParser::Create(std::string_view name) {
  ReasoningParser* parser = nullptr;
  // A DeepSeek-R1 template opens the thinking block itself, so the output starts inside it.
  if (name == "deepseek-r1") parser = new ReasoningParser("deepseek-r1", "", Default::kAlways);
  // Hybrid DeepSeek models think only when the request asks for it (chat_template_kwargs.thinking).
  // deepseek-v3 shares the Qwen3 tags, including a `<tool_call>` that ends thinking.
  if (name == "deepseek-v3") parser = new ReasoningParser("deepseek-v3", "<tool_call>", Default::kExplicitThinking);
  if (name == "deepseek-v4") parser = new ReasoningParser("deepseek-v4", "", Default::kExplicitThinking);
  // GLM-4.5 and Qwen3 think unless chat_template_kwargs.enable_thinking is false; a tool call may
  // start before `</think>` and ends the thinking block.
  if (name == "glm45") parser = new ReasoningParser("glm45", "<tool_call>", Default::kEnableThinking);
  if (name == "qwen3") parser = new ReasoningParser("qwen3", "<tool_call>", Default::kEnableThinking);
  if (parser == nullptr) {
    std::string valid;
    for (const std::string& n : Names()) valid += StrCat(valid.empty() ? "" : ", ", n);
    Fail("unknown --reasoning-parser '", name, "' (valid: ", valid, ")");
  }
  return std::unique_ptr<ReasoningParser>(parser);
}

bool ReasoningParser::StartsInReasoning(const Json& kwargs) const {
  auto flag = [&](const char* key) -> const Json* {
    if (!kwargs.is_object()) return nullptr;
    auto it = kwargs.find(key);
    return it == kwargs.end() ? nullptr : &*it;
  };
  switch (default_) {
    case Default::kAlways:
      return true;
    case Default::kExplicitThinking: {
      const Json* v = flag("thinking");
      return v != nullptr && v->is_boolean() && v->get<bool>();
    }
    case Default::kEnableThinking: {
      const Json* v = flag("enable_thinking");
      return !(v != nullptr && v->is_boolean() && !v->get<bool>());
    }
  }
  return false;
}

ReasoningStream::Options ReasoningParser::StreamOptions(bool in_reasoning, bool stream_reasoning) const {
  ReasoningStream::Options options;
  options.think_start = think_start_;
  options.think_end = think_end_;
  options.tool_start = tool_start_;
  options.in_reasoning = in_reasoning;
  options.stream_reasoning = stream_reasoning;
  return options;
}

ReasoningResult ReasoningParser::Parse(std::string_view text, bool in_reasoning) const {
  ReasoningStream stream(StreamOptions(in_reasoning, /*stream_reasoning=*/true));
  ReasoningDelta a = stream.Feed(text);
  ReasoningDelta b = stream.Finish();
  return ReasoningResult{a.reasoning + b.reasoning, a.content + b.content};
}

std::unique_ptr<ReasoningStream> ReasoningParser::NewStream(bool in_reasoning, bool stream_reasoning) const {
  return std::make_unique<ReasoningStream>(StreamOptions(in_reasoning, stream_reasoning));
}

}  // namespace fission::server
