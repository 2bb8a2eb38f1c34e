// Errors and invariants.
//
// fission::Error is for invalid input from a user, a file or a client: its message names what is
// wrong and where (file, tensor, field, line). The CLI turns it into exit code 2, the server into a
// 4xx JSON error. FISSION_CHECK is for invariants of our own code: a failure is a bug, so it aborts.
#pragma once

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fission {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates anything that can be streamed.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename... Args>
[[noreturn]] void Fail(const Args&... args) {
  throw Error(StrCat(args...));
}

// `text` as an error message may quote it: whole when it is at most `max_bytes` long, otherwise
// its first `max_bytes` (cut at a UTF-8 character boundary) and "... (N bytes)". A message that
// quotes a value a client sent stays short however large the value was.
std::string Abbreviate(std::string_view text, std::size_t max_bytes = 64);

[[noreturn]] void CheckFailed(const char* file, int line, const char* condition, const std::string& message);

}  // namespace fission

#define FISSION_CHECK(cond, ...)                                                        \
  do {                                                                                  \
    if (!(cond)) [[unlikely]]                                                           \
      ::fission::CheckFailed(__FILE__, __LINE__, #cond, ::fission::StrCat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#define FISSION_CHECK_EQ(a, b, ...) FISSION_CHECK((a) == (b), "(", (a), " vs ", (b), ") " __VA_OPT__(, ) __VA_ARGS__)
