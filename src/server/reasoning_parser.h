// Reasoning parsers (--reasoning-parser): split a model's output into the thinking text
// (`reasoning_content`) and the answer (`content`), whole or as a stream of text deltas.
//
// Every supported format wraps thinking in `<think>` ... `</think>`. What differs is whether the
// output starts inside the thinking block (the chat template may already have opened it) and
// whether a tool call may end the block without `</think>`. See docs/server_parsers.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"

namespace fission::server {

struct ReasoningResult {
  std::string reasoning_content;
  std::string content;
};

// One step of a stream: the new reasoning text and the new answer text (either may be empty).
struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

// Streaming split of one output. Feed text deltas as they are detokenized, then Finish once.
// Concatenating every delta gives exactly ReasoningParser::Parse of the whole text, however the
// text was cut: a tag split across deltas is held back until it can be recognised.
class ReasoningStream {
 public:
  struct Options {
    std::string think_start;
    std::string think_end;
    std::string tool_start;  // empty: no tool call ends thinking
    bool in_reasoning = false;
    bool stream_reasoning = true;
  };
  explicit ReasoningStream(Options options);

  ReasoningDelta Feed(std::string_view delta);
  // Flushes held-back text; after this the stream takes no more input.
  ReasoningDelta Finish();

 private:
  enum class State { kOpening, kReasoning, kContent };
  void Step(bool at_end, ReasoningDelta* out);
  void EmitReasoning(std::string_view text, ReasoningDelta* out);

  Options options_;
  State state_;
  std::string buffer_;          // input not yet classified
  std::string held_reasoning_;  // reasoning kept back when stream_reasoning is false
  bool finished_ = false;
};

// One --reasoning-parser format. Immutable and shareable between requests and threads.
class ReasoningParser {
 public:
  // The names --reasoning-parser accepts.
  static const std::vector<std::string>& Names();
  // An unknown name is an Error listing the valid ones.
  static std::unique_ptr<ReasoningParser> Create(std::string_view name);

  const std::string& name() const { return name_; }
  const std::string& think_start() const { return think_start_; }
  const std::string& think_end() const { return think_end_; }

  // Whether a request's output starts inside the thinking block, from the request's
  // chat_template_kwargs (an object or null): deepseek-r1 always; deepseek-v3 and deepseek-v4
  // only with {"thinking": true}; glm45 and qwen3 unless {"enable_thinking": false}.
  bool StartsInReasoning(const Json& chat_template_kwargs) const;

  ReasoningResult Parse(std::string_view text, bool in_reasoning) const;
  // stream_reasoning false (the request's `stream_reasoning`) keeps reasoning back until the
  // thinking block closes (or the stream finishes) and sends it as one delta.
  std::unique_ptr<ReasoningStream> NewStream(bool in_reasoning, bool stream_reasoning = true) const;

 private:
  enum class Default { kAlways, kEnableThinking, kExplicitThinking };
  ReasoningParser(std::string name, std::string tool_start, Default mode);
  ReasoningStream::Options StreamOptions(bool in_reasoning, bool stream_reasoning) const;

  std::string name_;
  std::string think_start_ = "<think>";
  std::string think_end_ = "</think>";
  std::string tool_start_;
  Default default_;
};

}  // namespace fission::server
