// Test helper: the Error a config.json body raises, or "" when it parses.
#pragma once

#include <string>

#include "io/model_config.h"

namespace fission::io {

inline std::string ParseErrorOf(const Json& j) {
  try {
    ParseModelConfig(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace fission::io
