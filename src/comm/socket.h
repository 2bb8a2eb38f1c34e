// TCP sockets for the multi-node bootstrap and the CPU communicator: blocking, whole-buffer sends
// and receives, length-prefixed frames, and connect/accept bounded by a timeout. Network failures
// are Errors naming the peer; SIGPIPE never fires (sends use MSG_NOSIGNAL).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fission::comm {

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const;
};

// "HOST:PORT" (IPv6 literals as "[::1]:PORT"). An Error names `flag` when the port is missing, not a
// number or outside [1, 65535] (0 too when `allow_zero`, "any free port", for tests), or the host
// is empty.
HostPort ParseHostPort(const std::string& value, const std::string& flag, bool allow_zero = false);

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd, std::string peer = "") : fd_(fd), peer_(std::move(peer)) {}
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  bool valid() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  // Who is at the other end, for messages ("node 1 at 10.0.0.2:40123").
  const std::string& peer() const { return peer_; }
  void set_peer(std::string peer) { peer_ = std::move(peer); }
  void Close();

  // The local and remote addresses of a connected socket (the port a listener got).
  HostPort LocalAddress() const;
  HostPort PeerAddress() const;

  // Sends every byte; an Error names the peer when the connection is gone.
  void SendAll(const void* data, std::size_t size);
  // Receives wait at most `seconds` (0: forever); a receive that runs out is an Error naming the
  // peer and the wait. Handshakes set it so a peer that connects and says nothing cannot stall them.
  void SetReceiveTimeout(double seconds);
  // Receives exactly `size` bytes. Returns false when the peer closed the connection before the
  // first byte; an Error when it closed in the middle or the connection failed.
  bool RecvAll(void* data, std::size_t size);

  // A frame: one type byte and a 64-bit little-endian length, then the payload.
  void SendFrame(std::uint8_t type, std::string_view payload);
  struct Frame {
    std::uint8_t type = 0;
    std::string payload;
  };
  // nullopt when the peer closed the connection cleanly between frames; an Error for a frame longer
  // than `max_size` or a connection that broke.
  std::optional<Frame> RecvFrame(std::size_t max_size = std::size_t{1} << 32);

 private:
  int fd_ = -1;
  std::string peer_;
  double receive_timeout_s_ = 0;
};

// Listens on `address` (port 0: any free port). `what` names the address in errors.
Socket Listen(const HostPort& address, const std::string& what);
// Waits up to `timeout_s` seconds for a connection; an Error names `what` on timeout.
// `budget_s`, when given, is the timeout the error names (a caller waiting in several steps passes
// what is left as `timeout_s` and its flag's whole value here).
Socket Accept(Socket& listener, double timeout_s, const std::string& what, double budget_s = -1);
// Connects to `address`, retrying while nobody listens yet, for up to `timeout_s` seconds; an
// Error names `what` and the address on timeout or when the host does not resolve.
Socket Connect(const HostPort& address, double timeout_s, const std::string& what);

}  // namespace fission::comm
