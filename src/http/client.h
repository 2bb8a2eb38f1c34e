// An asynchronous HTTP/1.1 client for the tools: keep-alive connection pools, JSON POSTs and
// responses delivered piece by piece as they arrive, each piece stamped with the steady-clock time
// its read completed (so a streamed SSE response can be timed token by token).
//
// One HttpClient owns its I/O threads. Requests may be started from any thread; callbacks run on
// an I/O thread and must not block.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"
#include "http/open_files.h"  // RaiseOpenFileLimit, which the tools call before a run
#include "http/url.h"

namespace fission::http {

struct ClientRequest {
  std::string method = "POST";
  std::string host;
  int port = 80;
  std::string target = "/";
  std::vector<Header> headers;  // Host, Content-Length and Connection are added
  std::string body;
  std::string content_type = "application/json";
  // Whole-request deadline; 0 = none.
  std::chrono::milliseconds timeout{0};

  static ClientRequest Post(const Url& base, std::string_view path, std::string body);
  static ClientRequest Get(const Url& base, std::string_view path);
};

struct ResponseHandlers {
  // The status line and headers arrived.
  std::function<void(int status, const std::vector<Header>& headers, Clock::time_point when)> on_headers;
  // Body bytes (de-chunked) as received.
  std::function<void(std::string_view data, Clock::time_point when)> on_data;
  // Exactly once, last: `error` is empty when the whole response arrived.
  std::function<void(const std::string& error, Clock::time_point when)> on_complete;
};

struct ClientResponse {
  int status = 0;
  std::vector<Header> headers;
  std::string body;
  std::string error;  // transport failure; empty on success
};

struct ClientOptions {
  int io_threads = 1;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(30)};
};

class HttpClient {
 public:
  explicit HttpClient(ClientOptions options = {});
  ~HttpClient();  // stops the I/O threads; outstanding requests are dropped without callbacks
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request`; its handlers are called on an I/O thread. A pooled idle connection to the
  // same host and port is reused when there is one.
  void Start(ClientRequest request, ResponseHandlers handlers);

  // Blocking convenience for control requests (model list, server info). Never call it from an
  // I/O thread of this client.
  ClientResponse Fetch(ClientRequest request);

  // Connections opened so far (reuse shows as fewer connections than requests).
  std::size_t connections_opened() const;

  class Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace fission::http
