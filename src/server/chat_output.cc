#include "server/chat_output.h"

namespace fission::server {
namespace {

class PlainSplitter final : public ChatOutputSplitter {
 public:
  ChatDelta Feed(const std::string& text) override { return {text, "", Json::array()}; }
  ChatDelta Finish() override { return {}; }
};

}  // namespace

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
