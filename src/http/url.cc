#include "http/url.h"

#include <charconv>

#include "base/error.h"

namespace fission::http {

Url Url::Parse(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    Fail("URL '", url, "': only http:// URLs are supported");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.find_first_of("?#") != std::string_view::npos) {
    Fail("URL '", url, "': a base URL takes no query or fragment");
  }
  Url out;
  out.path = std::string(path);
  std::string_view host = authority;
  if (!authority.empty() && authority.front() == '[') {  // [::1]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) Fail("URL '", url, "': unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') Fail("URL '", url, "': junk after the IPv6 address");
  } else {
    const size_t colon = authority.rfind(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      authority.remove_prefix(colon);
    } else {
      authority = {};
    }
  }
  if (host.empty()) Fail("URL '", url, "': missing host");
  out.host = std::string(host);
  if (!authority.empty()) {  // ":port"
    std::string_view digits = authority.substr(1);
    int port = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || port <= 0 || port > 65535) {
      Fail("URL '", url, "': bad port '", digits, "'");
    }
    out.port = port;
  }
  return out;
}

std::string Url::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return StrCat("http://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port, path);
}

std::string Url::Target(std::string_view suffix) const { return StrCat(path, suffix); }

}  // namespace fission::http
