#include "http/sse.h"

namespace fission::http {

std::optional<std::string_view> SseData(std::string_view line) {
  constexpr std::string_view kField = "data:";
  if (line.substr(0, kField.size()) != kField) return std::nullopt;
  line.remove_prefix(kField.size());
  if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  return line;
}

}  // namespace fission::http
