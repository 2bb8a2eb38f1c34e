#include "http/server.h"

#include <utility>  // before Boost: its 1.74 coroutine header needs std::exchange
#include <algorithm>
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
#include "http/listen_address.h"
#include "http/open_files.h"
#include "http/request_parser.h"

namespace fission::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Bytes a client may send ahead (pipelining) while a response is in progress before we stop
// reading from it.
constexpr std::size_t kMaxReadAhead = 1 << 20;

// Invalid UTF-8 from a client (a garbage path) is replaced, never thrown on.
std::string ErrorBody(int status, std::string_view message) {
  return Json{{"error", {{"message", message}, {"code", status}}}}.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Accepting again right after a failure that is not the client's (no descriptors left, no memory)
// would fail the same way in a busy loop: the acceptor waits, doubling from the first delay.
constexpr auto kFirstAcceptDelay = std::chrono::milliseconds(10);
constexpr auto kLastAcceptDelay = std::chrono::seconds(1);

}  // namespace

class Session;

class HttpServer::Impl {
 public:
  explicit Impl(ServerOptions o) : options(std::move(o)) {}

  void DoAccept();
  // Accepting failed with `ec`: log once per run of failures and try again after a delay.
  void AcceptLater(const boost::system::error_code& ec);
  void CloseAcceptor();
  void SignalSessions(bool force);
  void Dispatch(Request request, std::shared_ptr<Responder> responder);
  std::map<std::string, std::map<std::string, Handler>>::iterator FindPrefixRoute(const std::string& path);
  void Register(Session* s, std::weak_ptr<Session> w) {
    std::lock_guard lock(mu);
    sessions.emplace(s, std::move(w));
  }
  void Unregister(Session* s) {
    std::lock_guard lock(mu);
    sessions.erase(s);
    cv.notify_all();
  }
  std::size_t sessions_count() const {
    std::lock_guard lock(mu);
    return sessions.size();
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
  // On the acceptor's strand.
  asio::steady_timer accept_timer{acceptor.get_executor()};
  std::chrono::milliseconds accept_delay{0};
  std::uint64_t accept_failures = 0;
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
    std::string out = StatusAndHeaders(status, content_type, headers);
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    if (!head_) out += body;  // a HEAD answer has the headers of a GET, no body
    Enqueue(std::move(out));
    CompleteResponse();
  }

  void DoStartStream(std::uint64_t seq, int status, std::string content_type, std::vector<Header> headers) {
    if (seq != seq_ || state_ != State::kHandling || responded_) return;
    responded_ = true;
    streaming_ = true;
    // HTTP/1.0 has no chunked encoding: the body runs until the connection closes.
    chunked_ = version_ >= 11;
    if (!chunked_) keep_alive_ = false;
    std::string out = StatusAndHeaders(status, content_type, headers);
    if (FindHeader(headers, "Cache-Control") == nullptr) out += "Cache-Control: no-cache\r\n";
    if (chunked_) out += "Transfer-Encoding: chunked\r\n";
    out += "\r\n";
    Enqueue(std::move(out));
    if (head_) CompleteResponse();
  }

  void DoWrite(std::uint64_t seq, std::string chunk) {
    if (seq != seq_ || !streaming_ || finished_ || chunk.empty()) return;
    if (!chunked_) return Enqueue(std::move(chunk));
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
    if (chunked_) Enqueue("0\r\n\r\n");
    CompleteResponse();
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
    ApplyLimits(*parser_, server_->options.max_body_bytes);
    stream_.expires_after(server_->options.idle_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    auto expect = header.find(bhttp::field::expect);
    if (header.version() >= 11 && expect != header.end() && beast::iequals(expect->value(), "100-continue")) {
      // curl waits for this before sending a large body.
      Enqueue("HTTP/1.1 100 Continue\r\n\r\n");
    }
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnReadError(beast::error_code ec) {
    const int status = ParseErrorStatus(ec);
    if (status == 0) return HandleDisconnect();
    // Malformed request: answer once, then close.
    keep_alive_ = false;
    state_ = State::kHandling;
    responded_ = true;
    const std::string body = ErrorBody(status, "malformed HTTP request: " + ec.message());
    Enqueue(StatusAndHeaders(status, "application/json", {}) + "Content-Length: " + std::to_string(body.size()) +
            "\r\n\r\n" + body);
    CompleteResponse();
  }

  void OnRead(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    Request request = ToRequest(parser_->release(), remote_);
    keep_alive_ = request.keep_alive && !server_->stopping;
    version_ = request.version;
    head_ = request.method == "HEAD";
    ++seq_;
    responded_ = streaming_ = finished_ = false;
    state_ = State::kHandling;
    stream_.expires_never();
    StartWatch();
    server_->Dispatch(std::move(request), MakeResponder());
  }

  std::shared_ptr<Responder> MakeResponder();

  // While a response is produced we keep one read pending: it tells us at once when the client
  // goes away, and it collects a pipelined next request.
  void StartWatch() {
    if (watching_ || closed_ || half_closed_) return;
    watching_ = true;
    stream_.socket().async_read_some(buffer_.prepare(4096),
                                     [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                                       self->OnWatch(ec, n);
                                     });
  }

  void OnWatch(beast::error_code ec, std::size_t n) {
    watching_ = false;
    if (ec == asio::error::operation_aborted && state_ == State::kIdle && !closed_) return DoRead();
    if (ec == asio::error::eof && state_ == State::kHandling) {
      // The client shut down its sending side after its request (a half-close), which HTTP
      // allows: it still reads the answer. If it has in fact gone, the next write says so. No
      // read is pending now to keep the session alive, so it holds itself until it is done.
      half_closed_ = true;
      keep_alive_ = false;
      hold_ = shared_from_this();
      return;
    }
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

  // The response is whole once its queued bytes are written.
  void CompleteResponse() {
    finished_ = true;
    if (!writing_ && queue_.empty() && state_ == State::kHandling) ResponseDone();
  }

  void ResponseDone() {
    state_ = State::kIdle;
    disconnect_callbacks_.clear();
    auto keep = std::move(hold_);  // released when this returns
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
    hold_.reset();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  HttpServer::Impl* server_;
  std::string remote_;
  State state_ = State::kReading;
  std::uint64_t seq_ = 0;
  int version_ = 11;
  bool keep_alive_ = true;
  bool head_ = false;     // the request is a HEAD: headers only
  bool chunked_ = true;   // the open stream frames its writes as chunks
  bool responded_ = false;
  bool streaming_ = false;
  bool finished_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool half_closed_ = false;
  bool closed_ = false;
  std::shared_ptr<Session> hold_;  // set while half-closed and answering
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

// The route "P/*" with the longest P that `path` extends ("/v1/models/*" holds "/v1/models/x/y").
std::map<std::string, std::map<std::string, Handler>>::iterator HttpServer::Impl::FindPrefixRoute(
    const std::string& path) {
  auto best = routes.end();
  for (auto it = routes.begin(); it != routes.end(); ++it) {
    const std::string& key = it->first;
    if (key.size() < 2 || key.compare(key.size() - 2, 2, "/*") != 0) continue;
    const std::size_t prefix = key.size() - 1;  // keeps the slash
    if (path.size() > prefix && path.compare(0, prefix, key, 0, prefix) == 0 &&
        (best == routes.end() || key.size() > best->first.size()))
      best = it;
  }
  return best;
}

void HttpServer::Impl::Dispatch(Request request, std::shared_ptr<Responder> responder) {
  auto path = routes.find(request.path);
  if (path == routes.end()) path = FindPrefixRoute(request.path);
  if (path == routes.end()) {
    responder->Send(404, "application/json", ErrorBody(404, "no route for " + Abbreviate(request.path)));
    return;
  }
  // HEAD runs the GET handler; the session sends its headers without the body.
  const bool head_as_get = request.method == "HEAD" && !path->second.contains("HEAD");
  auto route = path->second.find(head_as_get ? std::string("GET") : request.method);
  if (route == path->second.end()) {
    std::string allowed;
    for (const auto& [method, handler] : path->second) {
      allowed += (allowed.empty() ? "" : ", ") + method;
      if (method == "GET" && !path->second.contains("HEAD")) allowed += ", HEAD";
    }
    responder->Send(405, "application/json",
                    ErrorBody(405, Abbreviate(request.method) + " not allowed on " + request.path), {{"Allow", allowed}});
    return;
  }
  const std::string what = request.method + " " + request.path;  // the handler may take the request
  try {
    route->second(std::move(request), responder);
  } catch (const Error& e) {
    responder->Send(400, "application/json", ErrorBody(400, e.what()));
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "http: handler for ", what, " threw: ", e.what());
    responder->Send(500, "application/json", ErrorBody(500, "internal error"));
  }
}

void HttpServer::Impl::DoAccept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) return AcceptLater(ec);
    if (accept_failures > 0) {
      Log(LogLevel::kWarning, "http: accepting connections again after ", accept_failures, " failed attempts");
      accept_failures = 0;
      accept_delay = std::chrono::milliseconds(0);
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Session>(std::move(socket), this)->Start();
    DoAccept();
  });
}

void HttpServer::Impl::AcceptLater(const boost::system::error_code& ec) {
  // A client that reset its connection before we took it costs nothing: accept the next one.
  if (ec == asio::error::connection_aborted || ec == asio::error::connection_reset) return DoAccept();
  if (accept_failures++ == 0)
    Log(LogLevel::kWarning, "http: cannot accept connections (", ec.message(), "); ", sessions_count(),
        " are open; retrying with back-off");
  accept_delay = std::clamp(accept_delay * 2, std::chrono::milliseconds(kFirstAcceptDelay),
                            std::chrono::milliseconds(kLastAcceptDelay));
  accept_timer.expires_after(accept_delay);
  accept_timer.async_wait([this](beast::error_code wait_ec) {
    if (!wait_ec && acceptor.is_open()) DoAccept();
  });
}

void HttpServer::Impl::CloseAcceptor() {
  asio::post(acceptor.get_executor(), [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_timer.cancel();
  });
}

void HttpServer::Impl::SignalSessions(bool force) {
  // Collect under the lock, post outside it: dropping the last reference to a session runs its
  // destructor, which takes the same lock.
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(mu);
    for (auto& [ptr, weak] : sessions) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
  }
  for (auto& session : live) session->Post([session, force] { session->DoServerStop(force); });
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
  // Every connection is a descriptor: the usual soft limit of 1024 is far below what clients open.
  const std::uint64_t open_files = RaiseOpenFileLimit();
  if (open_files > 0 && open_files < 4096)
    Log(LogLevel::kWarning, "http: at most ", open_files, " open files (ulimit -n): connections beyond that wait");
  beast::error_code ec;
  const auto address = asio::ip::make_address(ResolveListenAddress(s.options.host));
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

std::size_t HttpServer::open_connections() const { return impl_->sessions_count(); }

void HttpServer::StopAccepting() {
  Impl& s = *impl_;
  if (!s.started || s.stopping.exchange(true)) return;
  s.CloseAcceptor();
  s.SignalSessions(false);
}

void HttpServer::Stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  StopAccepting();
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, grace, [&s] { return s.sessions.empty(); });
  }
  s.SignalSessions(true);
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, std::chrono::seconds(2), [&s] { return s.sessions.empty(); });
  }
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
}

}  // namespace fission::http
