#include "comm/socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/error.h"

namespace fission::comm {
namespace {

std::string Errno() { return std::strerror(errno); }

HostPort FromSockaddr(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = {};
  HostPort out;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    out.port = ntohs(in->sin_port);
  } else if (address.ss_family == AF_INET6) {
    const auto* in = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    out.port = ntohs(in->sin6_port);
  }
  out.host = host;
  return out;
}

// Resolves host:port; an Error names `what` when the host is unknown.
addrinfo* Resolve(const HostPort& address, bool passive, const std::string& what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const std::string port = std::to_string(address.port);
  const int rc = getaddrinfo(address.host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) Fail(what, " ", address.ToString(), ": cannot resolve host '", address.host, "': ", gai_strerror(rc));
  return result;
}

// Every connection: no Nagle delay (step plans are small and latency-bound), and TCP keepalive
// probes after 10 s of silence, every 5 s, 6 times, so a peer whose host vanished without a reset
// turns into an Error after about 40 s instead of a wait that never ends.
void SetNoDelay(int fd) {
  const int one = 1, idle = 10, interval = 5, count = 6;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return StrCat("[", host, "]:", port);
  return StrCat(host, ":", port);
}

HostPort ParseHostPort(const std::string& value, const std::string& flag, bool allow_zero) {
  const std::size_t colon = value.rfind(':');
  if (colon == std::string::npos)
    Fail(flag, " '", value, "' has no port (expected HOST:PORT, e.g. 10.0.0.1:5000)");
  HostPort out;
  out.host = value.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  else if (out.host.find(':') != std::string::npos)
    Fail(flag, " '", value, "': write an IPv6 host in brackets ([::1]:PORT)");
  if (out.host.empty()) Fail(flag, " '", value, "' has no host (expected HOST:PORT)");
  const std::string port = value.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    Fail(flag, " '", value, "': the port '", port, "' is not a number");
  out.port = std::stoi(port);
  if (out.port > 65535 || (out.port == 0 && !allow_zero))
    Fail(flag, " '", value, "': the port ", out.port, " is outside [1, 65535]");
  return out;
}

Socket::Socket(Socket&& other) noexcept
    : fd_(other.fd_), peer_(std::move(other.peer_)), receive_timeout_s_(other.receive_timeout_s_) {
  other.fd_ = -1;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.fd_;
    peer_ = std::move(other.peer_);
    receive_timeout_s_ = other.receive_timeout_s_;
    other.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() { Close(); }

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

HostPort Socket::LocalAddress() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  FISSION_CHECK(getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0, Errno());
  return FromSockaddr(address);
}

HostPort Socket::PeerAddress() const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  FISSION_CHECK(getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0, Errno());
  return FromSockaddr(address);
}

void Socket::SendAll(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd_, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Fail("lost the connection to ", peer_, ": send failed: ", Errno());
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void Socket::SetReceiveTimeout(double seconds) {
  timeval tv{};
  if (seconds > 0) {
    tv.tv_sec = static_cast<time_t>(seconds);
    tv.tv_usec = static_cast<suseconds_t>((seconds - static_cast<double>(tv.tv_sec)) * 1e6);
    if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;
  }
  if (setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
    Fail("cannot set a receive timeout on the connection to ", peer_, ": ", Errno());
  receive_timeout_s_ = seconds > 0 ? seconds : 0;
}

bool Socket::RecvAll(void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::recv(fd_, p + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && receive_timeout_s_ > 0)
      Fail(peer_, " sent nothing within ", receive_timeout_s_, " s");
    if (n < 0) Fail("lost the connection to ", peer_, ": ", Errno());
    if (n == 0) {
      if (got == 0) return false;
      Fail("lost the connection to ", peer_, ": it closed in the middle of a message");
    }
    got += static_cast<std::size_t>(n);
  }
  return true;
}

void Socket::SendFrame(std::uint8_t type, std::string_view payload) {
  unsigned char header[9];
  header[0] = type;
  std::uint64_t length = payload.size();
  for (int i = 0; i < 8; ++i) header[1 + i] = static_cast<unsigned char>(length >> (8 * i));
  SendAll(header, sizeof(header));
  SendAll(payload.data(), payload.size());
}

std::optional<Socket::Frame> Socket::RecvFrame(std::size_t max_size) {
  unsigned char header[9];
  if (!RecvAll(header, sizeof(header))) return std::nullopt;
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t{header[1 + i]} << (8 * i);
  if (length > max_size) Fail("a message from ", peer_, " claims ", length, " bytes (at most ", max_size, ")");
  Frame frame;
  frame.type = header[0];
  frame.payload.resize(length);
  if (length > 0 && !RecvAll(frame.payload.data(), length))
    Fail("lost the connection to ", peer_, ": it closed in the middle of a message");
  return frame;
}

Socket Listen(const HostPort& address, const std::string& what) {
  addrinfo* info = Resolve(address, /*passive=*/true, what);
  std::string last_error = "no address";
  for (addrinfo* a = info; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) continue;
    const int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(s.fd(), SOMAXCONN) == 0) {
      freeaddrinfo(info);
      s.set_peer(StrCat("listener ", address.ToString()));
      return s;
    }
    last_error = Errno();
  }
  freeaddrinfo(info);
  Fail(what, " ", address.ToString(), ": cannot listen: ", last_error);
}

Socket Accept(Socket& listener, double timeout_s, const std::string& what, double budget_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) Fail(what, ": nobody connected within ", budget_s >= 0 ? budget_s : timeout_s, " s");
    pollfd p{listener.fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) Fail(what, ": poll failed: ", Errno());
    if (ready <= 0) continue;
    sockaddr_storage address{};
    socklen_t length = sizeof(address);
    const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      Fail(what, ": accept failed: ", Errno());
    }
    SetNoDelay(fd);
    return Socket(fd, FromSockaddr(address).ToString());
  }
}

Socket Connect(const HostPort& address, double timeout_s, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string last_error;
  while (true) {
    addrinfo* info = Resolve(address, /*passive=*/false, what);
    for (addrinfo* a = info; a != nullptr; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol), address.ToString());
      if (!s.valid()) continue;
      if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(info);
        SetNoDelay(s.fd());
        return s;
      }
      last_error = Errno();
    }
    freeaddrinfo(info);
    if (std::chrono::steady_clock::now() >= deadline)
      Fail(what, " ", address.ToString(), ": could not connect within ", timeout_s, " s (", last_error, ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace fission::comm
