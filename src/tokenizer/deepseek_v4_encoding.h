// DeepSeek-V4's chat encoding. Like V3.2 the model ships its prompt format as Python
// (encoding/encoding_dsv4.py, `encode_messages`) rather than a Jinja template; this is that
// encoder, string for string (tests/fixtures/tokenizer/dsv4_encoding.json holds its recorded
// outputs), and the chat renderer SGLang puts in front of it. What it shares with V3.2's lives in
// deepseek_encoding_common.h; V4 differs in its tools prompt, `<｜DSML｜tool_calls>`, tool results
// merged into user turns as `<tool_result>` blocks (sorted by call), reasoning kept whenever tools
// are offered, a reasoning-effort preamble, and the internal `task` and `latest_reminder` turns.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_renderer.h"

namespace fission::tokenizer {

struct DeepSeekV4Options {
  bool thinking = false;      // thinking_mode "thinking"; otherwise "chat"
  bool drop_thinking = true;  // in thinking mode, drop reasoning before the last user turn (never with tools)
  bool add_bos_token = true;
  // "max" (thinking mode starts with the maximum-effort preamble), "high" (no text of its own) or
  // none; another value is refused.
  std::optional<std::string> reasoning_effort;
};

// encode_messages(messages, thinking_mode, drop_thinking=..., add_default_bos_token=...,
// reasoning_effort=...), without a context: messages carry role (system, developer, user,
// assistant, tool, latest_reminder), content, reasoning_content, tool_calls (OpenAI form; arguments
// as JSON text, anything else becomes one "arguments" parameter), tool_call_id, task, wo_eos and, on
// system or developer messages, tools and response_format. Values print as Python's str() and
// json.dumps print them. A conversation the reference refuses is an Error.
std::string EncodeDeepSeekV4(const nlohmann::ordered_json& messages, const DeepSeekV4Options& options);

// The server's renderer for deepseek_v4 models: shapes an OpenAI request as SGLang's serving_chat
// does (as for V3.2, and keeping tool_call_id; tool-call arguments given as an object are passed as
// their JSON text), then encodes in thinking mode when the extra argument `thinking` is true (Python
// truthiness), with reasoning_effort "max" or "high" when the extra argument says so (any other
// value is dropped, as SGLang drops it).
class DeepSeekV4Encoding : public ChatRenderer {
 public:
  std::string Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                    const TokenizerConfig& config) const override;
};

}  // namespace fission::tokenizer
