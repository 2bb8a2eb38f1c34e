// The message of the fission::Error a call throws: tests of bad input compare it with what the
// user should read.
#pragma once

#include <string>
#include <utility>

#include "base/error.h"

namespace fission::testing_util {

// What `f()` throws as a fission::Error, or "" when it returns normally.
template <typename F>
std::string ErrorMessageOf(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace fission::testing_util
