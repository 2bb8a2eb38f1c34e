#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "tokenizer/jinja_evaluator.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_parser.h"

namespace fission::tokenizer {

struct ChatTemplate::Parsed {
  std::string source_name;
  jinja::Body body;
};

ChatTemplate::ChatTemplate(const std::string& source, std::string source_name) : parsed_(std::make_unique<Parsed>()) {
  parsed_->source_name = std::move(source_name);
  std::vector<jinja::Token> tokens = jinja::Tokenize(source, parsed_->source_name);
  parsed_->body = jinja::Parse(tokens, parsed_->source_name);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                                const TokenizerConfig& config) const {
  if (!messages.is_array()) Fail(parsed_->source_name, ": messages must be an array");
  nlohmann::ordered_json context = nlohmann::ordered_json::object();
  // transformers passes the special tokens that are set, then the call's arguments.
  if (config.bos_token) context["bos_token"] = *config.bos_token;
  if (config.eos_token) context["eos_token"] = *config.eos_token;
  if (config.unk_token) context["unk_token"] = *config.unk_token;
  if (config.pad_token) context["pad_token"] = *config.pad_token;
  context["messages"] = messages;
  context["tools"] = options.tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = options.add_generation_prompt;
  if (!options.extra.is_null()) {
    if (!options.extra.is_object()) Fail(parsed_->source_name, ": extra template arguments must be an object");
    for (auto it = options.extra.begin(); it != options.extra.end(); ++it) context[it.key()] = it.value();
  }
  return Render(context);
}

std::string ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) Fail(parsed_->source_name, ": the render context must be an object");
  std::unordered_map<std::string, jinja::Value> vars;
  for (auto it = context.begin(); it != context.end(); ++it) vars[it.key()] = jinja::Value::FromJson(it.value());
  return jinja::Render(parsed_->body, vars, parsed_->source_name);
}

ChatTemplate ChatTemplate::ForModel(const TokenizerConfig& config, const std::optional<std::string>& override_file) {
  if (override_file) {
    std::ifstream in(*override_file, std::ios::binary);
    if (!in) Fail(*override_file, ": cannot open chat template file");
    std::stringstream ss;
    ss << in.rdbuf();
    return ChatTemplate(ss.str(), *override_file);
  }
  if (config.chat_template.empty()) {
    Fail("tokenizer_config.json: the model has no chat_template (pass --chat-template FILE)");
  }
  return ChatTemplate(config.chat_template, "tokenizer_config.json: chat_template");
}

}  // namespace fission::tokenizer
