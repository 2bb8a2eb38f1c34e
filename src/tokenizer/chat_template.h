// Chat templates: the Jinja templates of tokenizer_config.json rendered the way transformers'
// apply_chat_template does (trim_blocks and lstrip_blocks on, loop controls, raise_exception,
// strftime_now, a tojson that keeps non-ASCII text and key order).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_renderer.h"
#include "tokenizer/tokenizer_config.h"

namespace fission::tokenizer {

namespace jinja {
struct Stmt;
}

class ChatTemplate : public ChatRenderer {
 public:
  // Parses `source`; a syntax error names `source_name`, the line and the column.
  explicit ChatTemplate(const std::string& source, std::string source_name = "chat_template");
  ~ChatTemplate() override;
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // Renders `messages` (a JSON array of message objects; key order is kept for tojson) with the
  // special-token strings of `config` (bos_token, eos_token, pad_token, unk_token).
  std::string Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                    const TokenizerConfig& config) const override;
  // Renders with an arbitrary context object (its keys become template variables).
  std::string Render(const nlohmann::ordered_json& context) const;

  // The template of a model: `override_file` (the --chat-template option) when given, else the one
  // in tokenizer_config.json (or chat_template.jinja). Fails when there is none.
  static ChatTemplate ForModel(const TokenizerConfig& config, const std::optional<std::string>& override_file);

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace fission::tokenizer
