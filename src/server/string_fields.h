// SGLang's fields that take one string or one per prompt (`rid`, `/tokenize`'s `prompt`), read the
// same way from either JSON flavour the server parses.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fission::server {

// `v` as strings when it is a string or an array of strings; nullopt for anything else.
template <typename J>
std::optional<std::vector<std::string>> StringOrStrings(const J& v) {
  if (v.is_string()) return std::vector<std::string>{v.template get<std::string>()};
  if (!v.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const J& item : v) {
    if (!item.is_string()) return std::nullopt;
    out.push_back(item.template get<std::string>());
  }
  return out;
}

}  // namespace fission::server
