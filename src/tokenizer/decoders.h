// Decoders turn the token strings of an id sequence back into text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings; the decoded text is their concatenation.
  virtual void DecodeChain(std::vector<std::string>* tokens) const = 0;
  // Rewrites each token string into the raw bytes it adds in the middle of a text: no UTF-8
  // repair, no rule that applies to the first token or to the text's ends (constrained decoding
  // matches grammars against these bytes).
  virtual void DecodeBytes(std::vector<std::string>* tokens) const { DecodeChain(tokens); }
};

std::unique_ptr<Decoder> MakeDecoder(const Json& j, const std::string& where);

}  // namespace fission::tokenizer
