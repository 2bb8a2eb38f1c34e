// Small text helpers the catalog's readers share.
#pragma once

#include <string>

namespace fission::catalog {

// `s` without leading and trailing whitespace (space, tab, CR, LF, and the other isspace bytes).
std::string Trim(const std::string& s);

}  // namespace fission::catalog
