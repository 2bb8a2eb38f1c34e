#include "server/text_scan.h"

#include <algorithm>

namespace fission::server {

std::size_t PartialTagSuffix(std::string_view text, std::initializer_list<std::string_view> tokens) {
  std::size_t best = 0;
  for (std::string_view token : tokens) {
    if (token.empty()) continue;
    const std::size_t longest = std::min(text.size(), token.size() - 1);
    for (std::size_t k = longest; k > best; --k) {
      if (text.substr(text.size() - k) == token.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

std::size_t FindFirstOf(std::string_view text, std::initializer_list<std::string_view> tokens, std::size_t from,
                        std::size_t* which) {
  std::size_t best = std::string_view::npos;
  std::size_t index = 0;
  for (std::string_view token : tokens) {
    if (!token.empty()) {
      const std::size_t at = text.find(token, from);
      if (at < best) {
        best = at;
        if (which != nullptr) *which = index;
      }
    }
    ++index;
  }
  return best;
}

std::size_t LeadingSpace(std::string_view text) {
  std::size_t n = 0;
  while (n < text.size() && IsAsciiSpace(text[n])) ++n;
  return n;
}

std::size_t TrailingSpace(std::string_view text) {
  std::size_t n = 0;
  while (n < text.size() && IsAsciiSpace(text[text.size() - 1 - n])) ++n;
  return n;
}

std::string_view TrimSpace(std::string_view text) {
  text.remove_prefix(LeadingSpace(text));
  text.remove_suffix(TrailingSpace(text));
  return text;
}

}  // namespace fission::server
