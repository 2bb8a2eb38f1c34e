// Small text helpers shared by the streaming parsers.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace fission::server {

// Length of the longest suffix of `text` that is a proper prefix of one of `tokens`: the text a
// stream must hold back because the next delta may complete a tag.
std::size_t PartialTagSuffix(std::string_view text, std::initializer_list<std::string_view> tokens);

// Earliest occurrence of any of `tokens` in `text` from `from`. Returns npos when none occurs;
// `which` gets the index of the token found (ties go to the earlier token in the list).
std::size_t FindFirstOf(std::string_view text, std::initializer_list<std::string_view> tokens, std::size_t from,
                        std::size_t* which);

inline bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}
// True when `text` could still grow into `token` (a non-empty proper prefix of it).
inline bool MayBecome(std::string_view text, std::string_view token) {
  return !text.empty() && text.size() < token.size() && StartsWith(token, text);
}

inline bool IsAsciiSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
// Number of leading / trailing ASCII whitespace characters.
std::size_t LeadingSpace(std::string_view text);
std::size_t TrailingSpace(std::string_view text);
std::string_view TrimSpace(std::string_view text);

}  // namespace fission::server
