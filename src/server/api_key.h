// `--api-key`: whether a request's Authorization header carries the key. The comparison takes the
// same time wherever the first difference is, so response times do not reveal the key byte by byte.
#pragma once

#include <string>
#include <string_view>

namespace fission::server {

// Equal contents, in time that depends only on the lengths.
bool ConstantTimeEquals(std::string_view a, std::string_view b);
// `authorization` (null when the header is absent) is exactly "Bearer " + key.
bool ApiKeyMatches(const std::string* authorization, const std::string& key);

}  // namespace fission::server
