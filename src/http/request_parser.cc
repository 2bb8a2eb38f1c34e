#include "http/request_parser.h"

#include <boost/asio/buffer.hpp>

namespace fission::http {

namespace bhttp = boost::beast::http;

void ApplyLimits(RequestParser& parser, std::size_t max_body_bytes) {
  parser.header_limit(kHeaderLimitBytes);
  parser.body_limit(max_body_bytes);
}

Request ToRequest(bhttp::request<bhttp::string_body>&& message, std::string remote) {
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  const std::size_t q = request.target.find('?');
  request.path = request.target.substr(0, q);
  if (q != std::string::npos) request.query = request.target.substr(q + 1);
  for (const auto& field : message)
    request.headers.push_back({std::string(field.name_string()), std::string(field.value())});
  request.version = static_cast<int>(message.version());
  request.keep_alive = message.keep_alive();
  request.body = std::move(message.body());
  request.remote_address = std::move(remote);
  return request;
}

int ParseErrorStatus(const boost::system::error_code& ec) {
  // Errors of Beast's HTTP category are the request's; end_of_stream and partial_message mean the
  // client went away, and any other category is the socket's.
  if (ec.category() != bhttp::make_error_code(bhttp::error::end_of_stream).category()) return 0;
  if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message) return 0;
  if (ec == bhttp::error::body_limit) return 413;
  if (ec == bhttp::error::header_limit) return 431;
  return 400;
}

ParseResult ParseRequest(std::string_view bytes, std::size_t max_body_bytes) {
  RequestParser parser;
  ApplyLimits(parser, max_body_bytes);
  parser.eager(true);
  ParseResult result;
  while (!parser.is_done()) {
    boost::system::error_code ec;
    const std::size_t n =
        parser.put(boost::asio::buffer(bytes.data() + result.consumed, bytes.size() - result.consumed), ec);
    result.consumed += n;
    // Bytes the parser could not use yet stay unused for good: the request is incomplete.
    if (ec == bhttp::error::need_more || (!ec && n == 0)) {
      if (n == 0) return result;
      continue;
    }
    if (ec) {
      result.outcome = ParseResult::Outcome::kMalformed;
      result.status = ParseErrorStatus(ec);
      if (result.status == 0) result.status = 400;
      result.error = ec.message();
      return result;
    }
  }
  result.outcome = ParseResult::Outcome::kComplete;
  result.request = ToRequest(parser.release(), "");
  return result;
}

}  // namespace fission::http
