#include "server/chat_output.h"

#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace fission::server {
namespace {

class PlainSplitter final : public ChatOutputSplitter {
 public:
  ChatDelta Feed(const std::string& text) override { return {text, "", Json::array()}; }
  ChatDelta Finish() override { return {}; }
};

class ParsedSplitter final : public ChatOutputSplitter {
 public:
  ParsedSplitter(std::unique_ptr<ReasoningStream> reasoning, std::unique_ptr<ToolCallStream> tools)
      : reasoning_(std::move(reasoning)), tools_(std::move(tools)) {}

  ChatDelta Feed(const std::string& text) override {
    ChatDelta d;
    std::string content = text;
    if (reasoning_) {
      ReasoningDelta r = reasoning_->Feed(text);
      d.reasoning = std::move(r.reasoning);
      content = std::move(r.content);
    }
    AddContent(content, &d);
    return d;
  }

  ChatDelta Finish() override {
    ChatDelta d;
    if (reasoning_) {
      ReasoningDelta r = reasoning_->Finish();
      d.reasoning = std::move(r.reasoning);
      AddContent(r.content, &d);
    }
    if (tools_) Append(tools_->Finish(), &d);
    return d;
  }

 private:
  void AddContent(const std::string& content, ChatDelta* d) {
    if (!tools_) {
      d->content += content;
      return;
    }
    if (!content.empty()) Append(tools_->Feed(content), d);
  }

  static void Append(const ToolCallChunk& chunk, ChatDelta* d) {
    d->content += chunk.content;
    for (const ToolCallDelta& t : chunk.tool_calls) {
      Json entry = {{"index", t.index}};
      if (!t.id.empty()) {
        entry["id"] = t.id;
        entry["type"] = "function";
      }
      Json function = {{"arguments", t.arguments}};
      if (!t.name.empty()) function["name"] = t.name;
      entry["function"] = function;
      d->tool_calls.push_back(entry);
    }
  }

  std::unique_ptr<ReasoningStream> reasoning_;
  std::unique_ptr<ToolCallStream> tools_;
};

}  // namespace

std::unique_ptr<ChatOutputSplitter> MakeParsedSplitter(const ReasoningParser* reasoning, bool in_reasoning,
                                                       bool stream_reasoning, const ToolCallParser* tools,
                                                       std::vector<ToolSpec> specs, std::uint64_t id_seed) {
  return std::make_unique<ParsedSplitter>(reasoning ? reasoning->NewStream(in_reasoning, stream_reasoning) : nullptr,
                                          tools ? tools->NewStream(std::move(specs), id_seed) : nullptr);
}

std::unique_ptr<ChatOutputSplitter> MakePlainSplitter() { return std::make_unique<PlainSplitter>(); }

void ChatMessageBuilder::Add(const ChatDelta& d) {
  content_ += d.content;
  reasoning_ += d.reasoning;
  for (const Json& call : d.tool_calls) {
    const std::size_t index = call.value("index", 0);
    while (tool_calls_.size() <= index)
      tool_calls_.push_back({{"id", ""}, {"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
    Json& t = tool_calls_[index];
    if (call.contains("id") && call["id"].is_string()) t["id"] = call["id"];
    if (call.contains("function")) {
      const Json& f = call["function"];
      if (f.contains("name") && f["name"].is_string()) t["function"]["name"] = f["name"];
      if (f.contains("arguments") && f["arguments"].is_string())
        t["function"]["arguments"] = t["function"]["arguments"].get<std::string>() + f["arguments"].get<std::string>();
    }
  }
}

Json ChatMessageBuilder::Message() const {
  Json message = {{"role", "assistant"}};
  message["content"] = content_.empty() && !tool_calls_.empty() ? Json(nullptr) : Json(content_);
  message["reasoning_content"] = reasoning_.empty() ? Json(nullptr) : Json(reasoning_);
  if (!tool_calls_.empty()) message["tool_calls"] = tool_calls_;
  return message;
}

}  // namespace fission::server
