// What turns a chat (OpenAI messages and tools) into the prompt text a model reads: a Jinja chat
// template (chat_template.h) or a model's own encoder written in code (deepseek_v32_encoding.h,
// deepseek_v4_encoding.h).
// The server, `fission tokenize` and the tests hold one through this interface.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer_config.h"

namespace fission::tokenizer {

struct ChatRenderOptions {
  bool add_generation_prompt = false;
  // The tools list (OpenAI function schemas); null renders as None, as when none are given.
  nlohmann::ordered_json tools = nullptr;
  // Extra keyword arguments, e.g. {"enable_thinking": false}; they may override the defaults.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class ChatRenderer {
 public:
  virtual ~ChatRenderer() = default;
  // Renders `messages` (a JSON array of message objects); a conversation the format refuses is an
  // Error saying why. `config` gives the special-token strings a template may print.
  virtual std::string Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                            const TokenizerConfig& config) const = 0;
};

// The renderer of a model, as SGLang chooses it: `override_file` (--chat-template) when given;
// else, for model_type deepseek_v32 whose tokenizer has no chat template, the DeepSeek-V3.2
// encoder; for model_type deepseek_v4, the DeepSeek-V4 encoder (whatever the tokenizer ships);
// else the tokenizer's template. Fails when there is none.
std::unique_ptr<ChatRenderer> ChatRendererForModel(const TokenizerConfig& config,
                                                   const std::optional<std::string>& override_file,
                                                   std::string_view model_type);

// config.json's model_type in `dir`, or "" when the directory has no config.json or it names none.
std::string ModelTypeOf(const std::string& dir);

}  // namespace fission::tokenizer
