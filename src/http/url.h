// Parsing of http:// base URLs such as "http://127.0.0.1:30000/v1" as the tools take them on the
// command line. Only plain HTTP: the tools talk to servers on the local network.
#pragma once

#include <string>
#include <string_view>

namespace fission::http {

struct Url {
  std::string host;
  int port = 80;
  // Path prefix without a trailing slash ("" or "/v1"); requests append their own path to it.
  std::string path;

  // Throws fission::Error naming `url` when it is not http://host[:port][/path].
  static Url Parse(std::string_view url);
  // "http://host:port" + path.
  std::string ToString() const;
  // path + suffix, where suffix starts with '/'.
  std::string Target(std::string_view suffix) const;
};

}  // namespace fission::http
