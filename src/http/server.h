// An event-driven HTTP/1.1 server: a few I/O threads serve every connection (no thread per
// connection), with keep-alive, chunked streaming (SSE) and a graceful stop. HTTP/1.0 clients get
// streams without chunking (the body ends when the connection closes); a client that half-closes
// after its request still gets the answer.
//
//   HttpServer server({.port = 30000});
//   server.AddRoute("POST", "/v1/completions", [](const Request& req, std::shared_ptr<Responder> r) {
//     r->StartStream(200, "text/event-stream");
//     r->Write("data: ...\n\n");   // from any thread, at any later time
//     r->Finish();
//   });
//   server.Start();
//
// Handlers run on an I/O thread and must not block; long work takes the Responder elsewhere.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "http/message.h"

namespace fission::http {

// The answer to one request. Every method may be called from any thread; calls are applied in
// order on the connection's I/O strand. Exactly one of Send() or StartStream()...Finish() is used
// per request; a Responder dropped without an answer sends 500 (or finishes an open stream).
class Responder {
 public:
  virtual ~Responder() = default;
  // A complete response with Content-Length.
  virtual void Send(int status, std::string content_type, std::string body, std::vector<Header> headers = {}) = 0;
  // Starts a chunked response; each Write() becomes one chunk on the wire.
  virtual void StartStream(int status, std::string content_type, std::vector<Header> headers = {}) = 0;
  virtual void Write(std::string chunk) = 0;
  virtual void Finish() = 0;
  // Closes the connection at once, mid-response (for a request that must be cut off).
  virtual void Abort() = 0;
  // True once the client has gone (connection closed or reset); writes are then dropped.
  virtual bool disconnected() const = 0;
  // Runs `callback` once, on an I/O thread, when the client disconnects before the response is
  // complete (immediately if it already has).
  virtual void OnDisconnect(std::function<void()> callback) = 0;
  // Bytes queued for this connection and not yet written: lets a producer notice a slow reader.
  virtual std::size_t pending_bytes() const = 0;
};

// A handler may take the Request by value to keep it (the body is moved, not copied) or by
// const reference.
using Handler = std::function<void(Request, std::shared_ptr<Responder>)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port, see HttpServer::port()
  int io_threads = 2;
  std::size_t max_body_bytes = 64u << 20;
  // A connection waiting for its next request is closed after this long.
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(10)};
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // Stop(0)
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Exact path match, or for a path "P/*" any longer path starting with "P/" (the longest such P
  // when no exact route matches). An unknown path answers 404, a known path with another method
  // 405; HEAD runs a GET route and sends its headers only. Routes are added before Start().
  void AddRoute(std::string method, std::string path, Handler handler);
  // Raises the open-file soft limit to the hard limit, binds and starts the I/O threads; throws
  // fission::Error when the address cannot be bound. When descriptors run out, accepting backs off
  // (10 ms doubling to 1 s) instead of retrying at once.
  void Start();
  // The bound port (after Start()).
  int port() const;
  // Closes the listener and idle connections; a connection busy with a response closes once it is
  // sent. Requests already read are still served. Idempotent.
  void StopAccepting();
  // StopAccepting, then lets in-flight responses finish for up to `grace`, then closes everything
  // and joins the I/O threads. Idempotent.
  void Stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  // Connections currently open (for tests and metrics).
  std::size_t open_connections() const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace fission::http
