#include "server/api_key.h"

namespace fission::server {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer string is visited; differences are folded in without branching.
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

bool ApiKeyMatches(const std::string* authorization, const std::string& key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization == nullptr || authorization->size() < kScheme.size()) return false;
  const std::string_view value(*authorization);
  const bool scheme = value.substr(0, kScheme.size()) == kScheme;
  const bool match = ConstantTimeEquals(value.substr(kScheme.size()), key);
  return scheme && match;
}

}  // namespace fission::server
