// DeepSeek tool-call markup.
//
// V3:   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{ARGS}\n```<｜tool▁call▁end｜>
//       ...more calls...<｜tool▁calls▁end｜>
// V3.1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// V4:   <｜DSML｜tool_calls>\n<｜DSML｜invoke name="NAME">\n
//       <｜DSML｜parameter name="P" string="true|false">VALUE</｜DSML｜parameter>\n...</｜DSML｜invoke>\n
//       </｜DSML｜tool_calls>   (or a JSON object in place of the parameter tags)
// V3.2: the same DSML with <｜DSML｜function_calls> … </｜DSML｜function_calls> around the invokes.
#include <string>

#include "server/text_scan.h"
#include "server/tool_call_formats.h"

namespace fission::server {
namespace {

// Longest tool-call head (name and tags) we wait for before calling the markup malformed.
constexpr std::size_t kMaxHead = 512;


class DeepSeekV3Stream : public ToolCallStream {
 public:
  DeepSeekV3Stream(bool fenced, std::vector<ToolSpec> tools, std::uint64_t seed)
      : ToolCallStream(std::move(tools), seed), fenced_(fenced) {}

 private:
  static constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
  static constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
  static constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
  static constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
  static constexpr std::string_view kSep = "<｜tool▁sep｜>";
  static constexpr std::string_view kFenceOpen = "```json\n";
  static constexpr std::string_view kFenceClose = "\n```";

  enum class State { kContent, kSection, kHead, kArgs, kTail, kSkip };

  bool Step(bool at_end) override {
    switch (state_) {
      case State::kContent: {
        std::size_t which = 0;
        if (!ScanContent({kCallsBegin, kCallBegin}, at_end, &which)) return false;
        state_ = which == 0 ? State::kSection : State::kHead;
        return true;
      }
      case State::kSection:
        return StepSection(at_end);
      case State::kHead:
        return StepHead(at_end);
      case State::kArgs:
        return StepArgs(at_end);
      case State::kTail:
      case State::kSkip:
        return StepUntilCallEnd(at_end);
    }
    return false;
  }

  // Between calls: whitespace, the next call or the end of the section. Anything else is content.
  bool StepSection(bool at_end) {
    buffer_.erase(0, LeadingSpace(buffer_));
    if (StartsWith(buffer_, kCallBegin)) {
      buffer_.erase(0, kCallBegin.size());
      state_ = State::kHead;
      return true;
    }
    if (StartsWith(buffer_, kCallsEnd)) {
      buffer_.erase(0, kCallsEnd.size());
      AfterBlock();
      state_ = State::kContent;
      return true;
    }
    if (buffer_.empty()) return false;
    if (!at_end && (MayBecome(buffer_, kCallBegin) || MayBecome(buffer_, kCallsEnd))) return false;
    state_ = State::kContent;
    return true;
  }

  // The call's head up to where the arguments start. Limits are checked against positions, not
  // against how much text has arrived, so the verdict does not depend on how the text was cut.
  bool StepHead(bool at_end) {
    const std::size_t sep = buffer_.find(kSep);
    const std::size_t call_end = buffer_.find(kCallEnd);
    std::size_t args_at = std::string::npos;
    std::string_view name;
    bool malformed = call_end < sep || (sep == std::string::npos ? buffer_.size() >= kMaxHead + kSep.size()
                                                                 : sep > kMaxHead);
    if (!malformed && sep != std::string::npos) {
      if (!fenced_) {
        name = TrimSpace(std::string_view(buffer_).substr(0, sep));
        args_at = sep + kSep.size();
        malformed = name.empty() || name.find('<') != std::string_view::npos;
      } else {
        // "function<｜tool▁sep｜>NAME\n```json\n": the name ends at the line's end.
        const std::size_t from = sep + kSep.size();
        const std::size_t nl = buffer_.find('\n', from);
        if (nl == std::string::npos) {
          malformed = buffer_.size() - from > kMaxHead || call_end != std::string::npos;
        } else if (nl - from > kMaxHead || call_end < nl) {
          malformed = true;
        } else {
          name = TrimSpace(std::string_view(buffer_).substr(from, nl - from));
          malformed = name.empty() || name.find('<') != std::string_view::npos;
          const std::string_view rest = std::string_view(buffer_).substr(nl + 1);
          if (StartsWith(rest, kFenceOpen)) {
            args_at = nl + 1 + kFenceOpen.size();
          } else if (!at_end && !malformed && (rest.empty() || MayBecome(rest, kFenceOpen))) {
            return false;  // the fence may still be arriving
          } else {
            args_at = nl + 1;  // no fence: take the JSON as it comes
          }
        }
      }
    }
    if (!malformed && args_at == std::string::npos) {
      if (!at_end) return false;
      malformed = true;
    }
    if (malformed) {
      // Not a call we can read: hand the markup back as text.
      EmitContent(kCallBegin);
      state_ = State::kContent;
      return true;
    }
    const bool known = BeginCall(name);
    buffer_.erase(0, args_at);
    args_started_ = false;
    state_ = known ? State::kArgs : State::kSkip;
    return true;
  }

  // Streams the argument text as it arrives, without surrounding whitespace.
  bool StepArgs(bool at_end) {
    static constexpr std::string_view kFencedEnds[] = {kFenceClose, kCallEnd, kCallsEnd};
    std::size_t which = 0;
    const std::size_t at = fenced_ ? FindFirstOf(buffer_, {kFenceClose, kCallEnd, kCallsEnd}, 0, &which)
                                   : FindFirstOf(buffer_, {kCallEnd, kCallsEnd}, 0, &which);
    if (at == std::string::npos && !at_end) {
      const std::size_t keep = fenced_ ? PartialTagSuffix(buffer_, {kFenceClose, kCallEnd, kCallsEnd})
                                       : PartialTagSuffix(buffer_, {kCallEnd, kCallsEnd});
      std::string_view safe(buffer_.data(), buffer_.size() - keep);
      safe.remove_suffix(TrailingSpace(safe));  // held: it may end the arguments
      EmitArgs(safe);
      buffer_.erase(0, safe.size());
      return false;
    }
    const std::size_t end = at == std::string::npos ? buffer_.size() : at;
    std::string_view args(buffer_.data(), end);
    args.remove_suffix(TrailingSpace(args));
    EmitArgs(args);
    if (at == std::string::npos) {  // the output ended inside the arguments
      buffer_.clear();
      EndCall(/*complete=*/false);
      state_ = State::kContent;
      return false;
    }
    const std::string_view marker = kFencedEnds[fenced_ ? which : which + 1];
    buffer_.erase(0, end + marker.size());
    if (marker == kFenceClose) {
      state_ = State::kTail;
      return true;
    }
    EndCall(/*complete=*/true);
    if (marker == kCallsEnd) {
      AfterBlock();
      state_ = State::kContent;
    } else {
      state_ = State::kSection;
    }
    return true;
  }

  void EmitArgs(std::string_view text) {
    if (!args_started_) {
      text.remove_prefix(LeadingSpace(text));
      if (text.empty()) return;
      args_started_ = true;
    }
    AppendArguments(text);
  }

  // After the closing fence (kTail) or through an unknown function's call (kSkip): drop text up to
  // the call's end marker.
  bool StepUntilCallEnd(bool at_end) {
    std::size_t which = 0;
    const std::size_t at = FindFirstOf(buffer_, {kCallEnd, kCallsEnd}, 0, &which);
    const bool closing = state_ == State::kTail;
    if (at == std::string::npos) {
      if (at_end) {
        buffer_.clear();
        if (closing) EndCall(/*complete=*/true);
        state_ = State::kContent;
        return false;
      }
      buffer_.erase(0, buffer_.size() - PartialTagSuffix(buffer_, {kCallEnd, kCallsEnd}));
      return false;
    }
    buffer_.erase(0, at + (which == 0 ? kCallEnd.size() : kCallsEnd.size()));
    if (closing) EndCall(/*complete=*/true);
    if (which == 1) {
      AfterBlock();
      state_ = State::kContent;
    } else {
      state_ = State::kSection;
    }
    return true;
  }

  const bool fenced_;
  State state_ = State::kContent;
  bool args_started_ = false;
};

// DSML invoke blocks inside a block whose tag name is `block` (V4 "tool_calls", V3.2 "function_calls").
class DsmlStream : public ToolCallStream {
 public:
  DsmlStream(std::string_view block, std::vector<ToolSpec> tools, std::uint64_t seed)
      : ToolCallStream(std::move(tools), seed),
        section_(StrCat("<｜DSML｜", block, ">")),
        section_end_(StrCat("</｜DSML｜", block, ">")) {}

 private:
  static constexpr std::string_view kInvoke = "<｜DSML｜invoke";
  static constexpr std::string_view kInvokeEnd = "</｜DSML｜invoke>";
  static constexpr std::string_view kParam = "<｜DSML｜parameter";
  static constexpr std::string_view kParamEnd = "</｜DSML｜parameter>";

  enum class State { kContent, kSection, kInvokeHead, kBody, kParamHead, kParamValue, kJsonBody, kSkip };

  bool Step(bool at_end) override {
    switch (state_) {
      case State::kContent: {
        std::size_t which = 0;
        if (!ScanContent({section_}, at_end, &which)) return false;
        state_ = State::kSection;
        return true;
      }
      case State::kSection:
        return StepSection(at_end);
      case State::kInvokeHead:
        return StepInvokeHead(at_end);
      case State::kBody:
        return StepBody(at_end);
      case State::kParamHead:
        return StepParamHead(at_end);
      case State::kParamValue:
        return StepParamValue(at_end);
      case State::kJsonBody:
        return StepJsonBody(at_end);
      case State::kSkip:
        return StepSkip(at_end);
    }
    return false;
  }

  bool StepSection(bool at_end) {
    buffer_.erase(0, LeadingSpace(buffer_));
    if (StartsWith(buffer_, kInvoke)) {
      buffer_.erase(0, kInvoke.size());
      state_ = State::kInvokeHead;
      return true;
    }
    if (StartsWith(buffer_, section_end_)) {
      buffer_.erase(0, section_end_.size());
      AfterBlock();
      state_ = State::kContent;
      return true;
    }
    if (buffer_.empty()) return false;
    if (!at_end && (MayBecome(buffer_, kInvoke) || MayBecome(buffer_, section_end_))) return false;
    state_ = State::kContent;
    return true;
  }

  // The value of attribute `key` in a tag's attribute text ` name="x" string="true"`, or npos.
  static bool Attribute(std::string_view attrs, std::string_view key, std::string* value) {
    const std::string pattern = std::string(key) + "=\"";
    const std::size_t at = attrs.find(pattern);
    if (at == std::string_view::npos) return false;
    const std::size_t end = attrs.find('"', at + pattern.size());
    if (end == std::string_view::npos) return false;
    *value = std::string(attrs.substr(at + pattern.size(), end - at - pattern.size()));
    return true;
  }

  // Reads a tag's attributes up to '>'. False while the tag is still arriving; *ok tells whether
  // the tag could be read.
  bool ReadTag(bool at_end, std::string* attrs, bool* ok) {
    const std::size_t gt = buffer_.find('>');
    const std::size_t lt = buffer_.find('<');
    if (gt == std::string::npos || lt < gt || gt > kMaxHead) {
      if (!at_end && gt == std::string::npos && lt == std::string::npos && buffer_.size() <= kMaxHead) return false;
      *ok = false;
      return true;
    }
    *attrs = buffer_.substr(0, gt);
    buffer_.erase(0, gt + 1);
    *ok = true;
    return true;
  }

  bool StepInvokeHead(bool at_end) {
    std::string attrs, name;
    bool ok = false;
    if (!ReadTag(at_end, &attrs, &ok)) return false;
    if (!ok || !Attribute(attrs, "name", &name) || TrimSpace(name).empty()) {
      EmitContent(kInvoke);  // unreadable: back to text
      state_ = State::kContent;
      return true;
    }
    params_ = 0;
    state_ = BeginCall(TrimSpace(name)) ? State::kBody : State::kSkip;
    return true;
  }

  bool StepBody(bool at_end) {
    buffer_.erase(0, LeadingSpace(buffer_));
    if (StartsWith(buffer_, kParam)) {
      buffer_.erase(0, kParam.size());
      state_ = State::kParamHead;
      return true;
    }
    if (StartsWith(buffer_, kInvokeEnd)) {
      buffer_.erase(0, kInvokeEnd.size());
      AppendArguments(params_ == 0 ? "{}" : "}");
      EndCall(/*complete=*/true);
      state_ = State::kSection;
      return true;
    }
    if (params_ == 0 && StartsWith(buffer_, "{")) {
      state_ = State::kJsonBody;
      return true;
    }
    if (buffer_.empty()) return false;
    if (!at_end && (MayBecome(buffer_, kParam) || MayBecome(buffer_, kInvokeEnd))) return false;
    // Stray text inside an invoke is dropped up to the next byte that may start something we read
    // ('<', or '{' for a JSON body), so the verdict is the same wherever the text was cut.
    const std::size_t next = buffer_.find_first_of(params_ == 0 ? "<{" : "<", 1);
    buffer_.erase(0, next == std::string::npos ? buffer_.size() : next);
    return true;
  }

  bool StepParamHead(bool at_end) {
    std::string attrs;
    bool ok = false;
    if (!ReadTag(at_end, &attrs, &ok)) return false;
    std::string string_flag = "true";
    if (!ok || !Attribute(attrs, "name", &param_name_)) {
      state_ = State::kBody;  // unreadable parameter tag: skip it
      return true;
    }
    Attribute(attrs, "string", &string_flag);
    param_is_string_ = string_flag != "false";
    state_ = State::kParamValue;
    return true;
  }

  bool StepParamValue(bool at_end) {
    const std::size_t at = buffer_.find(kParamEnd);
    if (at == std::string::npos) {
      if (at_end) buffer_.clear();  // cut off inside a value: the call stays incomplete
      return false;
    }
    const std::string_view raw = TrimSpace(std::string_view(buffer_).substr(0, at));
    OrderedJson value;
    if (param_is_string_) {
      value = std::string(raw);
    } else {
      value = OrderedJson::parse(raw.begin(), raw.end(), nullptr, /*allow_exceptions=*/false);
      if (value.is_discarded()) value = std::string(raw);
    }
    std::string pair = params_ == 0 ? "{" : ",";
    pair += DumpJson(OrderedJson(param_name_));
    pair += ':';
    pair += DumpJson(value);
    AppendArguments(pair);
    ++params_;
    buffer_.erase(0, at + kParamEnd.size());
    state_ = State::kBody;
    return true;
  }

  bool StepJsonBody(bool at_end) {
    const std::size_t at = buffer_.find(kInvokeEnd);
    if (at == std::string::npos && !at_end) return false;
    const std::size_t end = at == std::string::npos ? buffer_.size() : at;
    const std::string_view body = TrimSpace(std::string_view(buffer_).substr(0, end));
    OrderedJson value = OrderedJson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    AppendArguments(value.is_object() ? DumpJson(value) : std::string(body));
    EndCall(/*complete=*/at != std::string::npos);
    buffer_.erase(0, at == std::string::npos ? buffer_.size() : at + kInvokeEnd.size());
    state_ = at == std::string::npos ? State::kContent : State::kSection;
    return at != std::string::npos;
  }

  bool StepSkip(bool at_end) {
    const std::size_t at = buffer_.find(kInvokeEnd);
    if (at == std::string::npos) {
      buffer_.erase(0, at_end ? buffer_.size() : buffer_.size() - PartialTagSuffix(buffer_, {kInvokeEnd}));
      return false;
    }
    buffer_.erase(0, at + kInvokeEnd.size());
    state_ = State::kSection;
    return true;
  }

  const std::string section_, section_end_;
  State state_ = State::kContent;
  int params_ = 0;
  std::string param_name_;
  bool param_is_string_ = true;
};

}  // namespace

std::unique_ptr<ToolCallStream> NewDeepSeekV3Stream(bool fenced, std::vector<ToolSpec> tools, std::uint64_t seed) {
  return std::make_unique<DeepSeekV3Stream>(fenced, std::move(tools), seed);
}

std::unique_ptr<ToolCallStream> NewDeepSeekV4Stream(std::vector<ToolSpec> tools, std::uint64_t seed) {
  return std::make_unique<DsmlStream>("tool_calls", std::move(tools), seed);
}

std::unique_ptr<ToolCallStream> NewDeepSeekV32Stream(std::vector<ToolSpec> tools, std::uint64_t seed) {
  return std::make_unique<DsmlStream>("function_calls", std::move(tools), seed);
}

}  // namespace fission::server
