#include "base/error.h"

#include <cstdio>
#include <cstdlib>

namespace fission {

void CheckFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "fission: internal error at %s:%d: CHECK(%s) failed %s\n", file, line, condition,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fission
