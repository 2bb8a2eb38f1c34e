// Fuzzes the chat-template lexer, parser and evaluator: the input is a template rendered with a
// small conversation. It must render or fail with fission::Error, never crash.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "tokenizer/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fission;
  static const nlohmann::ordered_json kMessages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "What is 2+2? 数学"},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
       "function": {"name": "calc", "arguments": {"expr": "2+2"}}}]},
      {"role": "tool", "content": "4"},
      {"role": "assistant", "content": "<think>add</think>4"}])");
  static const nlohmann::ordered_json kTools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}])");
  std::string source(reinterpret_cast<const char*>(data), size);
  try {
    tokenizer::ChatTemplate tmpl(source, "fuzz.jinja");
    tokenizer::TokenizerConfig config;
    config.bos_token = "<s>";
    config.eos_token = "</s>";
    tokenizer::ChatRenderOptions options;
    options.add_generation_prompt = size % 2 == 0;
    options.tools = kTools;
    options.extra = {{"enable_thinking", size % 3 == 0}};
    tmpl.Apply(kMessages, options, config);
  } catch (const Error&) {
  }
  return 0;
}
