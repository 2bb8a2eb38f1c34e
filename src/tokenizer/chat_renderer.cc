#include "tokenizer/chat_renderer.h"

#include <filesystem>

#include "tokenizer/chat_template.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/deepseek_v4_encoding.h"

namespace fission::tokenizer {

std::unique_ptr<ChatRenderer> ChatRendererForModel(const TokenizerConfig& config,
                                                   const std::optional<std::string>& override_file,
                                                   std::string_view model_type) {
  // DeepSeek-V3.2 ships no template: its format is code. A template given or shipped still wins.
  if (!override_file && config.chat_template.empty() && model_type == "deepseek_v32")
    return std::make_unique<DeepSeekV32Encoding>();
  // SGLang encodes every DeepSeek-V4 checkpoint with its encoder, a shipped template or not; a
  // template the operator names still wins.
  if (!override_file && model_type == "deepseek_v4") return std::make_unique<DeepSeekV4Encoding>();
  return std::make_unique<ChatTemplate>(ChatTemplate::ForModel(config, override_file));
}

std::string ModelTypeOf(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "config.json";
  if (!std::filesystem::is_regular_file(path)) return "";
  const Json config = ReadJsonOrFail(path.string());
  if (!config.is_object()) return "";
  auto it = config.find("model_type");
  return it != config.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace fission::tokenizer
