#include "base/error.h"

#include <cstdio>
#include <cstdlib>

namespace fission {

std::string Abbreviate(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes;
  // Back up over continuation bytes (10xxxxxx) so the prefix ends on a whole character.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return StrCat(text.substr(0, cut), "... (", text.size(), " bytes)");
}

void CheckFailed(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "fission: internal error at %s:%d: CHECK(%s) failed %s\n", file, line, condition,
               message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fission
