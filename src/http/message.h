// Plain data types shared by the HTTP server and client: headers and requests as handlers see them.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace fission::http {

// The one clock of the layer: every timestamp it hands out comes from here.
using Clock = std::chrono::steady_clock;

struct Header {
  std::string name;
  std::string value;
};

// Case-insensitive lookup; nullptr when absent.
const std::string* FindHeader(const std::vector<Header>& headers, std::string_view name);

struct Request {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: path plus optional "?query"
  std::string path;    // target without the query
  std::string query;   // after '?', without it
  std::vector<Header> headers;
  std::string body;
  std::string remote_address;
  int version = 11;         // 10 for HTTP/1.0, 11 for HTTP/1.1
  bool keep_alive = true;   // the client lets the connection carry another request after this one

  const std::string* FindHeader(std::string_view name) const { return http::FindHeader(headers, name); }
};

// The reason phrase for a status code ("OK", "Not Found"), "Unknown" when not standard.
std::string_view ReasonPhrase(int status);

}  // namespace fission::http
