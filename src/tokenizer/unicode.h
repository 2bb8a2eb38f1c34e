// UTF-8 and Unicode helpers for the tokenizer: decoding, lossy repair, whitespace, normalization
// forms and lowercasing, with the semantics of the reference implementation (Rust `str`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fission::tokenizer {

// Decodes the code point that starts at s[*pos] and advances *pos past it. An invalid sequence
// yields U+FFFD and advances over its maximal valid prefix (at least one byte), as WHATWG and
// Rust's from_utf8_lossy do.
char32_t NextCodePoint(std::string_view s, std::size_t* pos);
void AppendUtf8(std::string* out, char32_t cp);
bool IsValidUtf8(std::string_view s);
// `bytes` with every invalid sequence replaced by U+FFFD.
std::string Utf8Lossy(std::string_view bytes);
// Length in bytes of the UTF-8 sequence a lead byte announces (1 for invalid leads).
inline int Utf8SequenceLength(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
}

// The White_Space property (Rust char::is_whitespace).
bool IsWhitespace(char32_t c);
// Letters, marks, digits and '_' approximated for word-boundary checks of added tokens.
bool IsWordChar(char32_t c);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// Unicode normalization of valid UTF-8.
std::string Normalize(std::string_view s, NormalForm form);
// Full lowercase mapping, code point by code point.
std::string ToLower(std::string_view s);

}  // namespace fission::tokenizer
