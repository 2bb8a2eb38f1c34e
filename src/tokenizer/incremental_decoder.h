// Streaming detokenization: ids arrive one at a time and text is emitted as soon as it forms
// complete UTF-8. The concatenation of everything emitted (Step calls, then Finish) equals
// Tokenizer::Decode of all ids with the same skip_special_tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace fission::tokenizer {

class IncrementalDecoder {
 public:
  // `tokenizer` must outlive the decoder. `context` ids (for example the prompt's tail) give
  // decoders that look at neighbouring tokens the right start; their text is never emitted.
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special_tokens,
                     const std::vector<std::int32_t>& context = {});

  // Adds one id; returns the newly completed text (empty while a character is incomplete).
  std::string Step(std::int32_t id);
  // Returns the text still held back (an incomplete or invalid byte sequence at the end, decoded
  // with U+FFFD replacements). Further Step calls continue after it.
  std::string Finish();

 private:
  std::string DecodeRange(std::size_t begin, std::size_t end) const;
  // Emits `text` (the decode of [prefix_offset_, end)) beyond `prefix_text` and advances.
  std::string Commit(const std::string& prefix_text, const std::string& text, std::size_t end);

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<std::int32_t> ids_;
  std::size_t prefix_offset_ = 0;  // start of the window decoded for context
  std::size_t read_offset_ = 0;    // ids before this were emitted
};

}  // namespace fission::tokenizer
