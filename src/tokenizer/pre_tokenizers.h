// Pre-tokenizers of the tokenizer.json pipeline: they cut normalized text into words that the
// model tokenizes independently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::tokenizer {

struct Split {
  std::string text;
  bool at_start = false;  // begins at offset 0 of the input (Metaspace's "first" scheme needs it)
};
using Splits = std::vector<Split>;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `splits` by their refinement; empty splits are dropped.
  virtual void PreTokenize(Splits* splits) const = 0;
};

std::unique_ptr<PreTokenizer> MakePreTokenizer(const Json& j, const std::string& where);

// GPT-2's byte to printable-character table used by the ByteLevel components: the UTF-8 text of
// the character that stands for each byte.
const std::string& ByteLevelChar(unsigned char byte);
// Inverse: the byte a character stands for, or -1.
int ByteLevelByte(char32_t c);

}  // namespace fission::tokenizer
