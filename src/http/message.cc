#include "http/message.h"

#include <boost/beast/http/status.hpp>
#include <cctype>

namespace fission::http {

namespace {
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}
}  // namespace

const std::string* FindHeader(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return &h.value;
  }
  return nullptr;
}

std::string_view ReasonPhrase(int status) {
  const auto phrase = boost::beast::http::obsolete_reason(static_cast<boost::beast::http::status>(status));
  return std::string_view(phrase.data(), phrase.size());
}

}  // namespace fission::http
