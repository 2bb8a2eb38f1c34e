// What a chat completion's generated text becomes: assistant content, reasoning content (with a
// --reasoning-parser) and tool calls (with a --tool-call-parser), both streamed incrementally.
#pragma once

#include <memory>
#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::server {

struct ChatDelta {
  std::string content;
  std::string reasoning;
  Json tool_calls = Json::array();  // OpenAI delta entries: {index, id?, type?, function: {name?, arguments}}
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

class ChatOutputSplitter {
 public:
  virtual ~ChatOutputSplitter() = default;
  // Feeds the next piece of generated text; returns what can be released now.
  virtual ChatDelta Feed(const std::string& text) = 0;
  // The end of generation: releases anything held back.
  virtual ChatDelta Finish() = 0;
};

// Plain content: every piece of text is content.
std::unique_ptr<ChatOutputSplitter> MakePlainSplitter();

class ReasoningParser;
class ToolCallParser;
struct ToolSpec;

// Reasoning first (when a reasoning parser is given), then tool calls in the content that remains
// (when a tool-call parser is given and the request offers tools). Either may be null.
std::unique_ptr<ChatOutputSplitter> MakeParsedSplitter(const ReasoningParser* reasoning, bool in_reasoning,
                                                       bool stream_reasoning, const ToolCallParser* tools,
                                                       std::vector<ToolSpec> specs, std::uint64_t id_seed);

// Accumulates deltas into a final assistant message: content, reasoning_content, tool_calls.
class ChatMessageBuilder {
 public:
  void Add(const ChatDelta& delta);
  Json Message() const;
  bool has_tool_calls() const { return !tool_calls_.empty(); }

 private:
  std::string content_, reasoning_;
  Json tool_calls_ = Json::array();
};

}  // namespace fission::server
