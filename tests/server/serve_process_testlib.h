// Test helper: runs `fission serve` as a child process on an ephemeral port, and small blocking
// HTTP helpers to talk to it.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include <string>
#include <vector>

#include "base/json.h"
#include "http/client.h"

namespace fission::server {

// Limits the server process starts with (0: inherited).
struct ProcessLimits {
  std::uint64_t open_files_soft = 0;
  std::uint64_t open_files_hard = 0;
};

class ServeProcess {
 public:
  // Starts `fission serve --port 0 <args>` and waits until it prints its address.
  explicit ServeProcess(const std::vector<std::string>& args, const ProcessLimits& limits = {});
  // SIGTERM, then waits; the destructor checks nothing (tests call Stop to check the exit).
  ~ServeProcess();
  // Sends SIGTERM and returns the exit status (0 expected).
  int Stop();
  int port() const { return port_; }
  bool alive() const;
  const std::string& log_path() const { return log_path_; }
  pid_t pid() const { return pid_; }
  // Sends SIGTERM without waiting (Stop() then waits for the exit).
  void Terminate() const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

struct Reply {
  int status = 0;
  std::string body;
  Json json;  // parsed body when it is JSON
};

Reply Post(int port, const std::string& path, const std::string& body,
           const std::vector<http::Header>& headers = {});
Reply Get(int port, const std::string& path, const std::vector<http::Header>& headers = {});
// The same through `client` (whose pooled connections go away with it) instead of the shared one.
Reply Post(http::HttpClient& client, int port, const std::string& path, const std::string& body,
           const std::vector<http::Header>& headers = {});
// The JSON payloads of an SSE body ("data: {...}" events), and whether it ended with [DONE].
std::vector<Json> SseEvents(const std::string& body, bool* done = nullptr);
// The value of a metric line `name{...} value` in a /metrics text (first match), or -1.
double MetricValue(const std::string& metrics, const std::string& name);
// Polls /metrics until the server is idle (no request in flight, running or waiting, every KV
// page free or held only by the prefix cache) or `timeout_ms` passes; returns "" when idle, else
// what was last seen.
std::string WaitUntilIdle(int port, int timeout_ms = 5000);

// What a process uses, read from /proc: open descriptors and resident memory.
int OpenFileCount(pid_t pid);
std::int64_t ResidentBytes(pid_t pid);
// CPU seconds (user + system) the process has used.
double CpuSeconds(pid_t pid);

std::string DemoModelDir();
std::string FissionBinary();

}  // namespace fission::server

namespace fission::server {

// Sends raw bytes on a fresh connection and returns what comes back until the server closes the
// connection or `timeout_ms` passes. The status of the first response is parsed into *status (0
// when none came).
std::string RawExchange(int port, const std::string& bytes, int timeout_ms, int* status);
// A connected TCP socket to 127.0.0.1:port (caller closes), or -1.
int ConnectTo(int port);
// Sends `bytes` on a fresh connection, optionally half-closes it (shuts down our sending side),
// and returns everything read until the server closes it or `timeout_ms` passes.
std::string ExchangeToClose(int port, const std::string& bytes, bool half_close, int timeout_ms = 20000);

}  // namespace fission::server
