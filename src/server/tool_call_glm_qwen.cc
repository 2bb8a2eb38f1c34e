// `<tool_call>` markup of GLM and Qwen.
//
// GLM-4.5: <tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n...</tool_call>
// GLM-4.7: the same without the newlines: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>
// Qwen:    <tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>
#include <algorithm>
#include <string>

#include "server/text_scan.h"
#include "server/tool_call_formats.h"

namespace fission::server {
namespace {

constexpr std::string_view kStart = "<tool_call>";
constexpr std::string_view kEnd = "</tool_call>";
constexpr std::size_t kMaxName = 512;


class GlmStream : public ToolCallStream {
 public:
  GlmStream(std::vector<ToolSpec> tools, std::uint64_t seed) : ToolCallStream(std::move(tools), seed) {}

 private:
  static constexpr std::string_view kKey = "<arg_key>";
  static constexpr std::string_view kKeyEnd = "</arg_key>";
  static constexpr std::string_view kValue = "<arg_value>";
  static constexpr std::string_view kValueEnd = "</arg_value>";
  // Some GLM outputs carry the separators as the two characters `\n`.
  static constexpr std::string_view kEscapedNewline = "\\n";

  enum class State { kContent, kHead, kBody, kSkip };

  bool Step(bool at_end) override {
    switch (state_) {
      case State::kContent: {
        std::size_t which = 0;
        if (!ScanContent({kStart}, at_end, &which)) return false;
        state_ = State::kHead;
        return true;
      }
      case State::kHead:
        return StepHead(at_end);
      case State::kBody:
        return StepBody(at_end);
      case State::kSkip:
        return StepSkip(at_end);
    }
    return false;
  }

  // The function name runs to the end of its line or to the first tag.
  bool StepHead(bool at_end) {
    const std::size_t lead = LeadingSpace(buffer_);
    std::size_t which = 0;
    const std::size_t at = FindFirstOf(buffer_, {"\n", kEscapedNewline, kKey, kEnd, "<"}, lead, &which);
    if (at == std::string::npos || at - lead > kMaxName) {
      if (!at_end && buffer_.size() - lead <= kMaxName) return false;
      EmitContent(kStart);  // not a call we can read: back to text
      state_ = State::kContent;
      return true;
    }
    const std::string_view name = TrimSpace(std::string_view(buffer_).substr(lead, at - lead));
    if (name.empty()) {
      EmitContent(kStart);
      state_ = State::kContent;
      return true;
    }
    const bool known = BeginCall(name);
    buffer_.erase(0, at);
    params_ = 0;
    state_ = known ? State::kBody : State::kSkip;
    return true;
  }

  void SkipSeparators() {
    while (true) {
      const std::size_t space = LeadingSpace(buffer_);
      if (space > 0) {
        buffer_.erase(0, space);
      } else if (StartsWith(buffer_, kEscapedNewline)) {
        buffer_.erase(0, kEscapedNewline.size());
      } else {
        return;
      }
    }
  }

  bool StepBody(bool at_end) {
    SkipSeparators();
    if (StartsWith(buffer_, kEnd)) {
      buffer_.erase(0, kEnd.size());
      AppendArguments(params_ == 0 ? "{}" : "}");
      EndCall(/*complete=*/true);
      AfterBlock();
      state_ = State::kContent;
      return true;
    }
    if (StartsWith(buffer_, kKey)) return StepPair(at_end);
    if (buffer_.empty()) return false;
    if (!at_end && (MayBecome(buffer_, kKey) || MayBecome(buffer_, kEnd) || buffer_ == "\\")) return false;
    // Stray text between pairs is dropped up to the next '<', which may start a tag.
    const std::size_t next = buffer_.find('<', 1);
    buffer_.erase(0, next == std::string::npos ? buffer_.size() : next);
    return true;
  }

  // One <arg_key>K</arg_key> <arg_value>V</arg_value> pair, taken whole.
  bool StepPair(bool at_end) {
    const std::size_t key_end = buffer_.find(kKeyEnd, kKey.size());
    if (key_end == std::string::npos) {
      if (at_end) buffer_.clear();
      return false;
    }
    std::size_t value_at = key_end + kKeyEnd.size();
    while (value_at < buffer_.size()) {
      if (IsAsciiSpace(buffer_[value_at])) {
        ++value_at;
      } else if (std::string_view(buffer_).substr(value_at, 2) == kEscapedNewline) {
        value_at += 2;
      } else {
        break;
      }
    }
    const std::string_view after = std::string_view(buffer_).substr(value_at);
    if (!StartsWith(after, kValue)) {
      if (!at_end && (after.empty() || MayBecome(after, kValue) || after == "\\")) return false;
      buffer_.erase(0, key_end + kKeyEnd.size());  // a key without a value: drop it
      return true;
    }
    const std::size_t value_end = buffer_.find(kValueEnd, value_at + kValue.size());
    if (value_end == std::string::npos) {
      if (at_end) buffer_.clear();  // cut off inside a value: the call stays incomplete
      return false;
    }
    const std::string key(TrimSpace(std::string_view(buffer_).substr(kKey.size(), key_end - kKey.size())));
    const std::string_view raw =
        std::string_view(buffer_).substr(value_at + kValue.size(), value_end - value_at - kValue.size());
    const OrderedJson value = ConvertArgumentValue(raw, ParameterSchema(key));
    std::string pair = params_ == 0 ? "{" : ",";
    pair += DumpJson(OrderedJson(key));
    pair += ':';
    pair += DumpJson(value);
    AppendArguments(pair);
    ++params_;
    buffer_.erase(0, value_end + kValueEnd.size());
    return true;
  }

  bool StepSkip(bool at_end) {
    const std::size_t at = buffer_.find(kEnd);
    if (at == std::string::npos) {
      buffer_.erase(0, at_end ? buffer_.size() : buffer_.size() - PartialTagSuffix(buffer_, {kEnd}));
      return false;
    }
    buffer_.erase(0, at + kEnd.size());
    AfterBlock();
    state_ = State::kContent;
    return true;
  }

  State state_ = State::kContent;
  int params_ = 0;
};

enum class Match { kYes, kMaybe, kNo };

// Matches the usual head of a Hermes call, `{"name": "NAME", "arguments": ` (or "parameters"),
// with any whitespace between tokens. kMaybe: `text` is a prefix of such a head.
Match MatchHermesHead(std::string_view text, std::string* name, std::size_t* args_at) {
  std::size_t i = 0;
  auto space = [&] {
    while (i < text.size() && IsAsciiSpace(text[i])) ++i;
  };
  auto literal = [&](std::string_view token) {
    const std::size_t n = std::min(token.size(), text.size() - i);
    if (text.substr(i, n) != token.substr(0, n)) return Match::kNo;
    if (n < token.size()) return Match::kMaybe;
    i += token.size();
    return Match::kYes;
  };
  for (std::string_view token : {"{", "\"name\"", ":", "\""}) {
    space();
    if (const Match m = literal(token); m != Match::kYes) return m;
  }
  const std::size_t name_at = i;
  while (i < text.size() && text[i] != '"' && text[i] != '\\' && i - name_at <= kMaxName) ++i;
  if (i - name_at > kMaxName) return Match::kNo;
  if (i == text.size()) return Match::kMaybe;
  if (text[i] == '\\' || i == name_at) return Match::kNo;
  *name = std::string(text.substr(name_at, i - name_at));
  ++i;
  space();
  if (const Match m = literal(","); m != Match::kYes) return m;
  space();
  const std::size_t key_at = i;
  const Match arguments = literal("\"arguments\"");
  if (arguments != Match::kYes) {
    i = key_at;
    const Match parameters = literal("\"parameters\"");
    if (parameters == Match::kNo && arguments == Match::kNo) return Match::kNo;
    if (parameters != Match::kYes) return Match::kMaybe;
  }
  space();
  if (const Match m = literal(":"); m != Match::kYes) return m;
  space();
  if (i == text.size()) return Match::kMaybe;
  *args_at = i;
  return Match::kYes;
}

class QwenStream : public ToolCallStream {
 public:
  QwenStream(std::vector<ToolSpec> tools, std::uint64_t seed) : ToolCallStream(std::move(tools), seed) {}

 private:
  // kHead: deciding how to read the call. kArgs: streaming an `arguments` object as it is written.
  // kTail: after it, up to the closing tag. kWhole: any other layout, read once the tag closes.
  // kSkip: a call to a function the request does not offer.
  enum class State { kContent, kHead, kArgs, kTail, kWhole, kSkip };

  bool Step(bool at_end) override {
    switch (state_) {
      case State::kContent: {
        std::size_t which = 0;
        if (!ScanContent({kStart}, at_end, &which)) return false;
        state_ = State::kHead;
        return true;
      }
      case State::kHead:
        return StepHead(at_end);
      case State::kArgs:
        return StepArgs(at_end);
      case State::kTail:
      case State::kSkip:
        return StepToEnd(at_end);
      case State::kWhole:
        return StepWhole(at_end);
    }
    return false;
  }

  bool StepHead(bool at_end) {
    std::string name;
    std::size_t args_at = 0;
    const Match m = MatchHermesHead(buffer_, &name, &args_at);
    if (m == Match::kMaybe && !at_end) return false;
    if (m != Match::kYes || buffer_[args_at] != '{') {
      state_ = State::kWhole;
      return true;
    }
    if (!BeginCall(name)) {
      state_ = State::kSkip;
      return true;
    }
    buffer_.erase(0, args_at);
    depth_ = 0;
    in_string_ = escaped_ = false;
    state_ = State::kArgs;
    return true;
  }

  // Emits the object's text up to its matching brace, tracking strings so braces inside them do
  // not count. A '<' outside a string cannot be JSON: the arguments end there (and are invalid).
  bool StepArgs(bool at_end) {
    std::size_t i = 0;
    bool done = false;
    for (; i < buffer_.size() && !done; ++i) {
      const char c = buffer_[i];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (c == '}' || c == ']') {
        done = --depth_ == 0;
      } else if (c == '<') {
        done = true;
        --i;  // the '<' is not part of the arguments
      }
    }
    AppendArguments(std::string_view(buffer_).substr(0, i));
    buffer_.erase(0, i);
    if (done) {
      state_ = State::kTail;
      return true;
    }
    if (at_end) EndCall(/*complete=*/false);
    if (at_end) state_ = State::kContent;
    return false;
  }

  // Drops the rest of the call (the outer '}', or a skipped call) through the closing tag.
  bool StepToEnd(bool at_end) {
    const std::size_t at = buffer_.find(kEnd);
    if (at == std::string::npos) {
      if (at_end) {
        buffer_.clear();
        if (call_open()) EndCall(/*complete=*/true);
        state_ = State::kContent;
        return false;
      }
      buffer_.erase(0, buffer_.size() - PartialTagSuffix(buffer_, {kEnd}));
      return false;
    }
    buffer_.erase(0, at + kEnd.size());
    if (call_open()) EndCall(/*complete=*/true);
    AfterBlock();
    state_ = State::kContent;
    return true;
  }

  // Any other layout is one JSON object, read once its closing tag is here.
  bool StepWhole(bool at_end) {
    const std::size_t at = buffer_.find(kEnd);
    if (at == std::string::npos) {
      if (!at_end) return false;
      EmitContent(kStart);  // never closed: the text stays content
      EmitContent(buffer_);
      buffer_.clear();
      state_ = State::kContent;
      return false;
    }
    const std::string_view body = TrimSpace(std::string_view(buffer_).substr(0, at));
    const OrderedJson call = OrderedJson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    const OrderedJson* args = nullptr;
    if (call.is_object()) {
      if (auto it = call.find("arguments"); it != call.end()) args = &*it;
      if (auto it = call.find("parameters"); args == nullptr && it != call.end()) args = &*it;
    }
    const bool readable = call.is_object() && call.contains("name") && call["name"].is_string() &&
                          (args == nullptr || args->is_object() || args->is_string());
    if (!readable) {
      EmitContent(kStart);
      EmitContent(std::string_view(buffer_).substr(0, at + kEnd.size()));
    } else {
      if (BeginCall(call["name"].get<std::string>())) {
        // Arguments given as a JSON string are passed through as that string.
        AppendArguments(args == nullptr ? "{}" : args->is_string() ? args->get<std::string>() : DumpJson(*args));
        EndCall(/*complete=*/true);
      }
      AfterBlock();  // a call to a function the request does not offer is dropped
    }
    buffer_.erase(0, at + kEnd.size());
    state_ = State::kContent;
    return true;
  }

  State state_ = State::kContent;
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace

std::unique_ptr<ToolCallStream> NewGlmStream(std::vector<ToolSpec> tools, std::uint64_t seed) {
  return std::make_unique<GlmStream>(std::move(tools), seed);
}

std::unique_ptr<ToolCallStream> NewQwenStream(std::vector<ToolSpec> tools, std::uint64_t seed) {
  return std::make_unique<QwenStream>(std::move(tools), seed);
}

}  // namespace fission::server
