// The parts of tokenizer_config.json that change encoding, decoding and chat rendering.
#pragma once

#include <optional>
#include <string>

#include "base/json.h"

namespace fission::tokenizer {

// Reads a JSON file; every malformation, syntax or number overflow, fails naming the path.
Json ReadJsonOrFail(const std::string& path);

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  bool clean_up_tokenization_spaces = false;
  std::string chat_template;  // empty when the model has none
  std::string tokenizer_class;

  // Parses the object; errors name `where`.
  static TokenizerConfig FromJson(const Json& j, const std::string& where);
  // Reads `dir`/tokenizer_config.json; a missing file gives the defaults.
  static TokenizerConfig Load(const std::string& dir);
};

}  // namespace fission::tokenizer
