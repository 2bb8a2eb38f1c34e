#include "http/server.h"

#include <utility>  // before Boost: its 1.74 coroutine header needs std::exchange
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "base/error.h"
#include "base/json.h"
#include "base/log.h"

namespace fission::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t kHeaderLimit = 64 << 10;
// Bytes a client may send ahead (pipelining) while a response is in progress before we stop
// reading from it.
constexpr std::size_t kMaxReadAhead = 1 << 20;

// Invalid UTF-8 from a client (a garbage path) is replaced, never thrown on.
std::string ErrorBody(int status, std::string_view message) {
  return Json{{"error", {{"message", message}, {"code", status}}}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

class Session;

class HttpServer::Impl {
 public:
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  void DoAccept();
  void Dispatch(const Request& request, std::shared_ptr<Responder> responder);
  void Register(Session* s, std::weak_ptr<Session> w) {
    std::lock_guard lock(mu);
    sessions.emplace(s, std::move(w));
  }
  void Unregister(Session* s) {
    std::lock_guard lock(mu);
    sessions.erase(s);
    cv.notify_all();
  }

  // Declared before the io_context so that sessions destroyed with its pending handlers can still
  // unregister.
  mutable std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  std::map<std::string, std::map<std::string, Handler>> routes;  // path -> method -> handler
  ServerOptions options;
  std::atomic<bool> stopping{false};
  bool started = false;
  bool stopped = false;
  int port = 0;
  asio::io_context ioc;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  std::vector<std::thread> threads;
};

// One connection. Every member is touched only on the connection's strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server) : stream_(std::move(socket)), server_(server) {
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
  }
  ~Session() { server_->Unregister(this); }

  void Start() {
    server_->Register(this, weak_from_this());
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->DoRead(); });
  }

  // Entry points for responders and the server; each hops onto the strand.
  template <typename F>
  void Post(F&& f) {
    asio::post(stream_.get_executor(), std::forward<F>(f));
  }

  void DoSend(std::uint64_t seq, int status, std::string content_type, std::string body, std::vector<Header> headers) {
    if (seq != seq_ || state_ != State::kHandling || responded_) return;
    responded_ = true;
    finished_ = true;
    std::string out = StatusAndHeaders(status, content_type, headers);
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    out += body;
    Enqueue(std::move(out));
  }

  void DoStartStream(std::uint64_t seq, int status, std::string content_type, std::vector<Header> headers) {
    if (seq != seq_ || state_ != State::kHandling || responded_) return;
    responded_ = true;
    streaming_ = true;
    std::string out = StatusAndHeaders(status, content_type, headers);
    out += "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    Enqueue(std::move(out));
  }

  void DoWrite(std::uint64_t seq, std::string chunk) {
    if (seq != seq_ || !streaming_ || finished_ || chunk.empty()) return;
    char size[24];
    std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    std::string out;
    out.reserve(chunk.size() + 32);
    out += size;
    out += chunk;
    out += "\r\n";
    Enqueue(std::move(out));
  }

  void DoFinish(std::uint64_t seq) {
    if (seq != seq_ || !streaming_ || finished_) return;
    finished_ = true;
    Enqueue("0\r\n\r\n");
  }

  void DoAbort(std::uint64_t seq) {
    if (seq != seq_ || state_ != State::kHandling) return;
    keep_alive_ = false;
    disconnect_callbacks_.clear();  // our own doing, not the client's
    HandleDisconnect();
  }

  void DoOnDisconnect(std::uint64_t seq, std::function<void()> callback) {
    if (seq != seq_) return;
    if (closed_) {
      callback();
    } else if (state_ == State::kHandling) {
      disconnect_callbacks_.push_back(std::move(callback));
    }
  }

  // The server is stopping: an idle connection closes now, a busy one after its response.
  void DoServerStop(bool force) {
    keep_alive_ = false;
    if (force || state_ != State::kHandling) HandleDisconnect();
  }

  std::uint64_t seq() const { return seq_; }
  const std::shared_ptr<std::atomic<bool>>& disconnected_flag() const { return disconnected_; }
  const std::atomic<std::size_t>& pending_bytes() const { return pending_bytes_; }

 private:
  enum class State { kReading, kHandling, kIdle };

  std::string StatusAndHeaders(int status, const std::string& content_type, const std::vector<Header>& headers) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(ReasonPhrase(status)) + "\r\n";
    if (!content_type.empty()) out += "Content-Type: " + content_type + "\r\n";
    for (const Header& h : headers) out += h.name + ": " + h.value + "\r\n";
    if (!keep_alive_) out += "Connection: close\r\n";
    return out;
  }

  void DoRead() {
    if (closed_) return;
    if (server_->stopping) {
      HandleDisconnect();
      return;
    }
    state_ = State::kReading;
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(server_->options.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    auto expect = header.find(bhttp::field::expect);
    if (expect != header.end() && beast::iequals(expect->value(), "100-continue")) {
      // curl waits for this before sending a large body.
      Enqueue("HTTP/1.1 100 Continue\r\n\r\n");
    }
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnReadError(beast::error_code ec) {
    if (ec.category() == bhttp::make_error_code(bhttp::error::end_of_stream).category() &&
        ec != bhttp::error::end_of_stream &&
        ec != bhttp::error::partial_message) {
      // Malformed request: answer once, then close.
      const int status = ec == bhttp::error::body_limit ? 413 : ec == bhttp::error::header_limit ? 431 : 400;
      keep_alive_ = false;
      state_ = State::kHandling;
      responded_ = true;
      finished_ = true;
      const std::string body = ErrorBody(status, "malformed HTTP request: " + ec.message());
      Enqueue(StatusAndHeaders(status, "application/json", {}) + "Content-Length: " + std::to_string(body.size()) +
              "\r\n\r\n" + body);
      return;
    }
    HandleDisconnect();
  }

  void OnRead(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    auto message = parser_->release();
    Request request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    const size_t q = request.target.find('?');
    request.path = request.target.substr(0, q);
    if (q != std::string::npos) request.query = request.target.substr(q + 1);
    for (const auto& field : message) {
      request.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
    request.body = std::move(message.body());
    request.remote_address = remote_;
    keep_alive_ = message.keep_alive() && !server_->stopping;
    ++seq_;
    responded_ = streaming_ = finished_ = false;
    state_ = State::kHandling;
    stream_.expires_never();
    StartWatch();
    server_->Dispatch(request, MakeResponder());
  }

  std::shared_ptr<Responder> MakeResponder();

  // While a response is produced we keep one read pending: it tells us at once when the client
  // goes away, and it collects a pipelined next request.
  void StartWatch() {
    if (watching_ || closed_) return;
    watching_ = true;
    stream_.socket().async_read_some(buffer_.prepare(4096),
                                     [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                       self->OnWatch(ec, n);
                                     });
  }

  void OnWatch(beast::error_code ec, std::size_t n) {
    watching_ = false;
    if (ec == asio::error::operation_aborted && state_ == State::kIdle && !closed_) return DoRead();
    if (ec) return HandleDisconnect();
    buffer_.commit(n);
    if (state_ == State::kIdle) return DoRead();
    if (buffer_.size() < kMaxReadAhead) StartWatch();
  }

  void Enqueue(std::string bytes) {
    if (closed_) return;
    pending_bytes_ += bytes.size();
    queue_.push_back(std::move(bytes));
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    writing_ = true;
    asio::async_write(stream_.socket(), asio::buffer(queue_.front()),
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnWrite(ec); });
  }

  void OnWrite(beast::error_code ec) {
    writing_ = false;
    pending_bytes_ -= queue_.front().size();
    queue_.pop_front();
    if (ec) return HandleDisconnect();
    if (!queue_.empty()) return WriteNext();
    if (finished_ && state_ == State::kHandling) ResponseDone();
  }

  void ResponseDone() {
    state_ = State::kIdle;
    disconnect_callbacks_.clear();
    if (!keep_alive_ || server_->stopping) {
      beast::error_code ignored;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      return HandleDisconnect();
    }
    if (watching_) {
      // The pending watch read has no timeout; replace it by a timed request read.
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
    } else {
      DoRead();
    }
  }

  void HandleDisconnect() {
    if (closed_) return;
    closed_ = true;
    disconnected_->store(true);
    auto callbacks = std::move(disconnect_callbacks_);
    disconnect_callbacks_.clear();
    if (state_ == State::kHandling && !finished_) {
      for (auto& callback : callbacks) {
        try {
          callback();
        } catch (const std::exception& e) {
          Log(LogLevel::kError, "http: disconnect callback threw: ", e.what());
        }
      }
    }
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  HttpServer::Impl* server_;
  std::string remote_;
  State state_ = State::kReading;
  std::uint64_t seq_ = 0;
  bool keep_alive_ = true;
  bool responded_ = false;
  bool streaming_ = false;
  bool finished_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool closed_ = false;
  std::deque<std::string> queue_;
  std::atomic<std::size_t> pending_bytes_{0};
  std::shared_ptr<std::atomic<bool>> disconnected_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::function<void()>> disconnect_callbacks_;
};

namespace {

class SessionResponder : public Responder {
 public:
  SessionResponder(std::shared_ptr<Session> session, std::uint64_t seq)
      : session_(session), seq_(seq), disconnected_(session->disconnected_flag()) {}

  ~SessionResponder() override {
    const int phase = phase_.load();
    if (phase == kNone) {
      Send(500, "application/json", ErrorBody(500, "the handler produced no response"), {});
    } else if (phase == kStreaming) {
      Finish();
    }
  }

  void Send(int status, std::string content_type, std::string body, std::vector<Header> headers) override {
    phase_ = kDone;
    if (auto s = session_.lock()) {
      s->Post([s, seq = seq_, status, ct = std::move(content_type), b = std::move(body),
               h = std::move(headers)]() mutable { s->DoSend(seq, status, std::move(ct), std::move(b), std::move(h)); });
    }
  }
  void StartStream(int status, std::string content_type, std::vector<Header> headers) override {
    phase_ = kStreaming;
    if (auto s = session_.lock()) {
      s->Post([s, seq = seq_, status, ct = std::move(content_type), h = std::move(headers)]() mutable {
        s->DoStartStream(seq, status, std::move(ct), std::move(h));
      });
    }
  }
  void Write(std::string chunk) override {
    if (auto s = session_.lock()) {
      s->Post([s, seq = seq_, c = std::move(chunk)]() mutable { s->DoWrite(seq, std::move(c)); });
    }
  }
  void Finish() override {
    phase_ = kDone;
    if (auto s = session_.lock()) s->Post([s, seq = seq_] { s->DoFinish(seq); });
  }
  void Abort() override {
    phase_ = kDone;
    if (auto s = session_.lock()) s->Post([s, seq = seq_] { s->DoAbort(seq); });
  }
  bool disconnected() const override { return disconnected_->load(); }
  void OnDisconnect(std::function<void()> callback) override {
    if (auto s = session_.lock()) {
      s->Post([s, seq = seq_, cb = std::move(callback)]() mutable { s->DoOnDisconnect(seq, std::move(cb)); });
    } else {
      callback();
    }
  }
  std::size_t pending_bytes() const override {
    auto s = session_.lock();
    return s ? s->pending_bytes().load() : 0;
  }

 private:
  enum Phase { kNone, kStreaming, kDone };
  std::weak_ptr<Session> session_;
  std::uint64_t seq_;
  std::shared_ptr<std::atomic<bool>> disconnected_;
  std::atomic<int> phase_{kNone};
};

}  // namespace

std::shared_ptr<Responder> Session::MakeResponder() {
  return std::make_shared<SessionResponder>(shared_from_this(), seq_);
}

void HttpServer::Impl::Dispatch(const Request& request, std::shared_ptr<Responder> responder) {
  auto path = routes.find(request.path);
  if (path == routes.end()) {
    responder->Send(404, "application/json", ErrorBody(404, "no route for " + request.path));
    return;
  }
  auto route = path->second.find(request.method);
  if (route == path->second.end()) {
    std::string allowed;
    for (const auto& [method, handler] : path->second) allowed += (allowed.empty() ? "" : ", ") + method;
    responder->Send(405, "application/json", ErrorBody(405, request.method + " not allowed on " + request.path),
                    {{"Allow", allowed}});
    return;
  }
  try {
    route->second(request, responder);
  } catch (const Error& e) {
    responder->Send(400, "application/json", ErrorBody(400, e.what()));
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "http: handler for ", request.method, " ", request.path, " threw: ", e.what());
    responder->Send(500, "application/json", ErrorBody(500, "internal error"));
  }
}

void HttpServer::Impl::DoAccept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), this)->Start();
    } else {
      Log(LogLevel::kWarning, "http: accept failed: ", ec.message());
    }
    DoAccept();
  });
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { Stop(std::chrono::milliseconds(0)); }

void HttpServer::AddRoute(std::string method, std::string path, Handler handler) {
  FISSION_CHECK(!impl_->started, "routes are added before Start()");
  impl_->routes[std::move(path)][std::move(method)] = std::move(handler);
}

void HttpServer::Start() {
  FISSION_CHECK(!impl_->started, "Start() called twice");
  Impl& s = *impl_;
  beast::error_code ec;
  const auto address = asio::ip::make_address(s.options.host, ec);
  if (ec) Fail("http server: bad host address '", s.options.host, "': ", ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(s.options.port));
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) Fail("http server: cannot listen on ", s.options.host, ":", s.options.port, ": ", ec.message());
  s.port = s.acceptor.local_endpoint().port();
  s.started = true;
  s.DoAccept();
  const int threads = std::max(1, s.options.io_threads);
  for (int i = 0; i < threads; ++i) s.threads.emplace_back([&s] { s.ioc.run(); });
}

int HttpServer::port() const { return impl_->port; }

std::size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->sessions.size();
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  s.stopping = true;
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
  });
  auto signal_all = [&s](bool force) {
    // Collect under the lock, post outside it: dropping the last reference to a session runs its
    // destructor, which takes the same lock.
    std::vector<std::shared_ptr<Session>> live;
    {
      std::lock_guard lock(s.mu);
      for (auto& [ptr, weak] : s.sessions) {
        if (auto session = weak.lock()) live.push_back(std::move(session));
      }
    }
    for (auto& session : live) session->Post([session, force] { session->DoServerStop(force); });
  };
  signal_all(false);
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, grace, [&s] { return s.sessions.empty(); });
  }
  signal_all(true);
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, std::chrono::seconds(2), [&s] { return s.sessions.empty(); });
  }
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace fission::http
