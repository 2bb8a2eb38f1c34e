// Reading a request off the wire: Beast's parser with the server's limits, the Request handlers
// see, and the status a malformed request is answered with. The server reads asynchronously with
// these pieces; ParseRequest runs the same parser over bytes in memory (tests, the fuzz target).
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <string>
#include <string_view>

#include "http/message.h"

namespace fission::http {

inline constexpr std::size_t kHeaderLimitBytes = 64 << 10;

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Applies the header limit and `max_body_bytes` to a fresh parser.
void ApplyLimits(RequestParser& parser, std::size_t max_body_bytes);
// The Request of a complete message (moves its body).
Request ToRequest(boost::beast::http::request<boost::beast::http::string_body>&& message, std::string remote);
// How a failed read is answered: 413 (body too large), 431 (headers too large) or 400 (any other
// malformed request); 0 when the connection itself ended (closed, reset, timed out) and there is
// no one to answer.
int ParseErrorStatus(const boost::system::error_code& ec);

struct ParseResult {
  enum class Outcome { kComplete, kIncomplete, kMalformed };
  Outcome outcome = Outcome::kIncomplete;
  int status = 0;      // kMalformed: the status of the answer
  std::string error;   // kMalformed: what is wrong
  Request request;     // kComplete
  std::size_t consumed = 0;  // bytes of `bytes` the parser used
};

// Parses the first request in `bytes`; kIncomplete when they end before it does.
ParseResult ParseRequest(std::string_view bytes, std::size_t max_body_bytes);

}  // namespace fission::http
