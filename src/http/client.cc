#include "http/client.h"


#include <utility>  // before Boost: its 1.74 coroutine header needs std::exchange
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstring>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/socket.h>
#include <time.h>

#include "base/error.h"

namespace fission::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

ClientRequest ClientRequest::Post(const Url& base, std::string_view path, std::string body) {
  ClientRequest r;
  r.method = "POST";
  r.host = base.host;
  r.port = base.port;
  r.target = base.Target(path);
  r.body = std::move(body);
  return r;
}

ClientRequest ClientRequest::Get(const Url& base, std::string_view path) {
  ClientRequest r = Post(base, path, "");
  r.method = "GET";
  r.content_type.clear();
  return r;
}

namespace {

struct Connection {
  explicit Connection(asio::any_io_executor executor) : stream(std::move(executor)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  bool reused = false;
};

std::string PoolKey(const ClientRequest& r) { return r.host + ":" + std::to_string(r.port); }

}  // namespace

class HttpClient::Impl {
 public:
  explicit Impl(ClientOptions o) : options(std::move(o)) {}

  std::unique_ptr<Connection> TakeIdle(const std::string& key) {
    std::lock_guard lock(mu);
    auto it = idle.find(key);
    if (it == idle.end() || it->second.empty()) return nullptr;
    auto conn = std::move(it->second.back());
    it->second.pop_back();
    conn->reused = true;
    return conn;
  }
  void ReturnIdle(const std::string& key, std::unique_ptr<Connection> conn) {
    conn->buffer.consume(conn->buffer.size());
    std::lock_guard lock(mu);
    idle[key].push_back(std::move(conn));
  }

  ClientOptions options;
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{ioc.get_executor()};
  std::vector<std::thread> threads;
  std::atomic<std::size_t> opened{0};
  std::mutex mu;
  // Declared after the io_context: idle sockets are destroyed before it.
  std::map<std::string, std::vector<std::unique_ptr<Connection>>> idle;
};

namespace {

// One request/response exchange on one connection.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpClient::Impl* client, ClientRequest request, ResponseHandlers handlers)
      : client_(client), request_(std::move(request)), handlers_(std::move(handlers)), key_(PoolKey(request_)) {
    if (request_.timeout.count() > 0) deadline_ = Clock::now() + request_.timeout;
    wire_ = request_.method + " " + request_.target + " HTTP/1.1\r\nHost: " + request_.host + ":" +
            std::to_string(request_.port) + "\r\nUser-Agent: fission\r\nAccept: */*\r\n";
    for (const Header& h : request_.headers) wire_ += h.name + ": " + h.value + "\r\n";
    if (!request_.body.empty() || request_.method == "POST") {
      if (!request_.content_type.empty()) wire_ += "Content-Type: " + request_.content_type + "\r\n";
      wire_ += "Content-Length: " + std::to_string(request_.body.size()) + "\r\n";
    }
    wire_ += "\r\n";
    wire_ += request_.body;
  }

  void Run() {
    conn_ = client_->TakeIdle(key_);
    if (conn_) {
      Send();
    } else {
      Connect();
    }
  }

 private:
  void ArmTimer() {
    if (deadline_) {
      conn_->stream.expires_at(*deadline_);
    } else {
      conn_->stream.expires_never();
    }
  }

  void Connect() {
    conn_ = std::make_unique<Connection>(asio::make_strand(client_->ioc));
    client_->opened++;
    resolver_.emplace(conn_->stream.get_executor());
    resolver_->async_resolve(request_.host, std::to_string(request_.port),
                             [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
                               if (ec) return self->Complete("cannot resolve " + self->key_ + ": " + ec.message());
                               if (self->deadline_) {
                                 self->conn_->stream.expires_at(*self->deadline_);
                               } else {
                                 self->conn_->stream.expires_after(self->client_->options.connect_timeout);
                               }
                               self->conn_->stream.async_connect(
                                   results, [self](beast::error_code ec, const tcp::endpoint&) {
                                     if (ec) return self->Complete("cannot connect to " + self->key_ + ": " + ec.message());
                                     beast::error_code ignored;
                                     self->conn_->stream.socket().set_option(tcp::no_delay(true), ignored);
                                     const int on = 1;
                                     ::setsockopt(self->conn_->stream.socket().native_handle(), SOL_SOCKET,
                                                  SO_TIMESTAMPNS, &on, sizeof(on));
                                     self->Send();
                                   });
                             });
  }

  void Send() {
    parser_.emplace();
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());  // boost::none misbehaves in 1.74
    parser_->eager(true);
    ArmTimer();
    asio::async_write(conn_->stream, asio::buffer(wire_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->Retry("write failed: " + ec.message());
      self->ReadSome();
    });
  }

  // Reads with recvmsg so that each read carries the kernel's receive time (SO_TIMESTAMPNS): a
  // burst of tokens from many streams is then stamped when it arrived, not when the event loop got
  // round to it. Without a kernel stamp the read's completion time stands in.
  void ReadSome() {
    if (deadline_) {
      if (!timer_) timer_.emplace(conn_->stream.get_executor());
      timer_->expires_at(*deadline_);
      timer_->async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec || !self->conn_) return;
        self->timed_out_ = true;
        beast::error_code ignored;
        self->conn_->stream.socket().cancel(ignored);
      });
    }
    conn_->stream.socket().async_wait(tcp::socket::wait_read,
                                      [self = shared_from_this()](beast::error_code ec) { self->OnReadable(ec); });
  }

  void OnReadable(beast::error_code ec) {
    const Clock::time_point steady_now = Clock::now();
    if (timer_) timer_->cancel();
    if (timed_out_) return Complete("timed out", steady_now);
    if (ec) return ReadFailed(ec.message());
    auto space = conn_->buffer.prepare(64 << 10);
    iovec iov{space.data(), space.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec)) * 2];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(conn_->stream.socket().native_handle(), &msg, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return ReadSome();
      return ReadFailed(std::strerror(errno));
    }
    if (n == 0) {
      // Only a response whose header has arrived can end at EOF (a body delimited by close);
      // beast's put_eof would call a parser that saw nothing at all "done".
      if (parser_->is_header_done()) {
        beast::error_code eof;
        parser_->put_eof(eof);
        if (!eof && parser_->is_done()) return Parse(steady_now);
      }
      return ReadFailed("connection closed by the server");
    }
    conn_->buffer.commit(static_cast<std::size_t>(n));
    Parse(KernelTime(msg, steady_now));
  }

  static Clock::time_point KernelTime(msghdr& msg, Clock::time_point fallback) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
      timespec arrived;
      std::memcpy(&arrived, CMSG_DATA(c), sizeof(arrived));
      // Both clocks read back to back, so the conversion adds no error of its own.
      const Clock::time_point steady_now = Clock::now();
      timespec now;
      clock_gettime(CLOCK_REALTIME, &now);
      const std::int64_t age_ns =
          (static_cast<std::int64_t>(now.tv_sec) - arrived.tv_sec) * 1000000000 + (now.tv_nsec - arrived.tv_nsec);
      // The kernel stamps in wall-clock time: convert through its age, and ignore a stamp that a
      // clock step made implausible.
      if (age_ns >= 0 && age_ns < 10'000'000'000) return steady_now - std::chrono::nanoseconds(age_ns);
    }
    return fallback;
  }

  void ReadFailed(const std::string& why) {
    if (!received_any_) return Retry("read failed: " + why);
    Complete("response interrupted: " + why);
  }

  // Feeds the buffered bytes to the parser, handing out headers and body pieces stamped `when`.
  void Parse(Clock::time_point when) {
    received_any_ = true;
    for (;;) {
      auto& body = parser_->get().body();
      body.data = buf_;
      body.size = sizeof(buf_);
      body.more = true;
      beast::error_code ec;
      const std::size_t used = parser_->put(conn_->buffer.data(), ec);
      conn_->buffer.consume(used);
      bool need_more = false;
      if (ec == bhttp::error::need_buffer) {
        ec = {};
      } else if (ec == bhttp::error::need_more) {
        ec = {};
        need_more = true;
      }
      if (ec) return Complete("malformed response: " + ec.message(), when);
      if (parser_->is_header_done() && !headers_delivered_) {
        headers_delivered_ = true;
        if (handlers_.on_headers) {
          std::vector<Header> headers;
          for (const auto& field : parser_->get()) {
            headers.push_back({std::string(field.name_string()), std::string(field.value())});
          }
          handlers_.on_headers(parser_->get().result_int(), headers, when);
        }
      }
      const std::size_t got = sizeof(buf_) - parser_->get().body().size;
      if (got > 0 && handlers_.on_data) handlers_.on_data(std::string_view(buf_, got), when);
      if (parser_->is_done()) {
        if (parser_->keep_alive()) client_->ReturnIdle(key_, std::move(conn_));
        return Complete("", when);
      }
      if (need_more || (used == 0 && got == 0) || conn_->buffer.size() == 0) break;
    }
    ReadSome();
  }

  // A pooled connection the server has meanwhile closed fails before any byte of the response:
  // try once more on a fresh connection.
  void Retry(const std::string& error) {
    if (conn_ && conn_->reused && !retried_) {
      retried_ = true;
      conn_.reset();
      timer_.reset();  // it ran on the old connection's strand
      Connect();
      return;
    }
    Complete(error);
  }

  void Complete(const std::string& error, Clock::time_point when = Clock::now()) {
    if (!error.empty()) conn_.reset();
    if (handlers_.on_complete) handlers_.on_complete(error, when);
  }

  HttpClient::Impl* client_;
  ClientRequest request_;
  ResponseHandlers handlers_;
  std::string key_;
  std::string wire_;
  std::optional<Clock::time_point> deadline_;
  std::unique_ptr<Connection> conn_;
  std::optional<tcp::resolver> resolver_;
  std::optional<bhttp::response_parser<bhttp::buffer_body>> parser_;
  std::optional<asio::steady_timer> timer_;  // the request deadline while waiting for bytes
  bool timed_out_ = false;
  char buf_[16384];
  bool received_any_ = false;
  bool headers_delivered_ = false;
  bool retried_ = false;
};

}  // namespace

HttpClient::HttpClient(ClientOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {
  const int threads = std::max(1, impl_->options.io_threads);
  for (int i = 0; i < threads; ++i) impl_->threads.emplace_back([impl = impl_.get()] { impl->ioc.run(); });
}

HttpClient::~HttpClient() {
  impl_->work.reset();
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->idle.clear();
}

void HttpClient::Start(ClientRequest request, ResponseHandlers handlers) {
  auto exchange = std::make_shared<Exchange>(impl_.get(), std::move(request), std::move(handlers));
  asio::post(impl_->ioc, [exchange] { exchange->Run(); });
}

ClientResponse HttpClient::Fetch(ClientRequest request) {
  auto response = std::make_shared<ClientResponse>();
  auto done = std::make_shared<std::promise<void>>();
  ResponseHandlers handlers;
  handlers.on_headers = [response](int status, const std::vector<Header>& headers, Clock::time_point) {
    response->status = status;
    response->headers = headers;
  };
  handlers.on_data = [response](std::string_view data, Clock::time_point) { response->body.append(data); };
  handlers.on_complete = [response, done](const std::string& error, Clock::time_point) {
    response->error = error;
    done->set_value();
  };
  auto future = done->get_future();
  Start(std::move(request), std::move(handlers));
  future.wait();
  return std::move(*response);
}

std::size_t HttpClient::connections_opened() const { return impl_->opened.load(); }

}  // namespace fission::http
