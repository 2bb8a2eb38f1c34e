// DeepSeek-V3.2's chat encoding. The model ships its prompt format as Python
// (encoding/encoding_dsv32.py, `encode_messages`) rather than a Jinja template; this is that
// encoder, string for string (tests/fixtures/tokenizer/dsv32_encoding.json holds its recorded
// outputs), and the chat renderer SGLang puts in front of it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_renderer.h"

namespace fission::tokenizer {

struct DeepSeekV32Options {
  bool thinking = false;      // thinking_mode "thinking"; otherwise "chat"
  bool drop_thinking = true;  // in thinking mode, drop reasoning of turns before the last user turn
  bool add_bos_token = true;
};

// encode_messages(messages, thinking_mode, drop_thinking=..., add_default_bos_token=...): messages
// carry role, content, reasoning_content, tool_calls (OpenAI form; arguments as JSON text or an
// object) and, on system or developer messages, tools and response_format. Values print as Python's
// str() and json.dumps print them. A conversation the reference refuses is an Error.
std::string EncodeDeepSeekV32(const nlohmann::ordered_json& messages, const DeepSeekV32Options& options);

// The server's renderer for deepseek_v32 models: shapes an OpenAI request as SGLang's serving_chat
// does before it calls the encoder (content null becomes "", text parts are joined with spaces, an
// empty system message is put first when there is none and carries the tools, a final assistant
// message becomes a user turn, or with add_generation_prompt false is continued), then encodes in
// thinking mode when the extra argument `thinking` is true (Python truthiness).
class DeepSeekV32Encoding : public ChatRenderer {
 public:
  std::string Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                    const TokenizerConfig& config) const override;
};

}  // namespace fission::tokenizer
