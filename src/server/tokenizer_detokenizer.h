// The engine's Detokenizer on top of a real tokenizer: generated ids to text, special tokens
// skipped (what OpenAI-style responses show by default).
#pragma once

#include "engine/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

class TokenizerDetokenizer final : public engine::Detokenizer {
 public:
  explicit TokenizerDetokenizer(const tokenizer::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string Decode(const std::vector<std::int32_t>& ids) const override { return tokenizer_.Decode(ids, true); }

 private:
  const tokenizer::Tokenizer& tokenizer_;
};

}  // namespace fission::server
