// Test helper: runs `fission serve` as a child process on an ephemeral port, and small blocking
// HTTP helpers to talk to it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/json.h"
#include "http/client.h"

namespace fission::server {

class ServeProcess {
 public:
  // Starts `fission serve --port 0 <args>` and waits until it prints its address.
  explicit ServeProcess(const std::vector<std::string>& args);
  // SIGTERM, then waits; the destructor checks nothing (tests call Stop to check the exit).
  ~ServeProcess();
  // Sends SIGTERM and returns the exit status (0 expected).
  int Stop();
  int port() const { return port_; }
  bool alive() const;
  const std::string& log_path() const { return log_path_; }

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
// The JSON payloads of an SSE body ("data: {...}" events), and whether it ended with [DONE].
std::vector<Json> SseEvents(const std::string& body, bool* done = nullptr);
// The value of a metric line `name{...} value` in a /metrics text (first match), or -1.
double MetricValue(const std::string& metrics, const std::string& name);

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

}  // namespace fission::server
