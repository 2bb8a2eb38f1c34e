#include "server/serve_process_testlib.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/error.h"
#include "common/child_process.h"

namespace fission::server {

std::string DemoModelDir() { return std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3"; }
std::string FissionBinary() { return std::string(FISSION_BINARY_DIR) + "/fission"; }

ServeProcess::ServeProcess(const std::vector<std::string>& args, const ProcessLimits& limits) {
  std::vector<std::string> argv = {FissionBinary(), "serve", "--port", "0"};
  argv.insert(argv.end(), args.begin(), args.end());
  const testing_util::Child child =
      testing_util::SpawnWithLog(argv, "serve", {limits.open_files_soft, limits.open_files_hard});
  pid_ = child.pid;
  log_path_ = child.log_path;
  port_ = testing_util::WaitForListeningPort(child, 60);
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0) Stop();
}

bool ServeProcess::alive() const { return testing_util::ChildAlive(pid_); }

void ServeProcess::Terminate() const {
  if (pid_ > 0) ::kill(pid_, SIGTERM);
}

int ServeProcess::Stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

http::HttpClient& Client() {
  static http::HttpClient client;
  return client;
}

Reply Finish(http::ClientResponse response) {
  Reply reply;
  reply.status = response.error.empty() ? response.status : -1;
  reply.body = response.error.empty() ? response.body : response.error;
  try {
    reply.json = Json::parse(reply.body);
  } catch (const std::exception&) {
  }
  return reply;
}

}  // namespace

std::string WaitUntilIdle(int port, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string metrics;
  while (true) {
    metrics = Get(port, "/metrics").body;
    const bool idle = MetricValue(metrics, "fission:requests_in_flight") == 0 &&
                      MetricValue(metrics, "sglang:num_running_reqs") == 0 &&
                      MetricValue(metrics, "sglang:num_queue_reqs") == 0 &&
                      MetricValue(metrics, "fission:kv_pages_free") + MetricValue(metrics, "fission:kv_pages_cached") ==
                          MetricValue(metrics, "fission:kv_pages_total");
    if (idle) return "";
    if (std::chrono::steady_clock::now() > deadline) return metrics;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int OpenFileCount(pid_t pid) {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(StrCat("/proc/", pid, "/fd"))) ++count;
  return count;
}

std::int64_t ResidentBytes(pid_t pid) {
  std::ifstream in(StrCat("/proc/", pid, "/statm"));
  std::int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

double CpuSeconds(pid_t pid) {
  std::ifstream in(StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) start after the last ')'.
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

Reply Post(int port, const std::string& path, const std::string& body, const std::vector<http::Header>& headers) {
  return Post(Client(), port, path, body, headers);
}

Reply Post(http::HttpClient& client, int port, const std::string& path, const std::string& body,
           const std::vector<http::Header>& headers) {
  http::ClientRequest request = http::ClientRequest::Post(http::Url::Parse(StrCat("http://127.0.0.1:", port)), path, body);
  request.headers = headers;
  request.timeout = std::chrono::seconds(120);
  return Finish(client.Fetch(std::move(request)));
}

Reply Get(int port, const std::string& path, const std::vector<http::Header>& headers) {
  http::ClientRequest request = http::ClientRequest::Get(http::Url::Parse(StrCat("http://127.0.0.1:", port)), path);
  request.headers = headers;
  request.timeout = std::chrono::seconds(60);
  return Finish(Client().Fetch(std::move(request)));
}

std::vector<Json> SseEvents(const std::string& body, bool* done) {
  std::vector<Json> events;
  if (done) *done = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string payload = line.substr(6);
    if (payload == "[DONE]") {
      if (done) *done = true;
      continue;
    }
    events.push_back(Json::parse(payload));
  }
  return events;
}

double MetricValue(const std::string& metrics, const std::string& name) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name + "{", 0) == 0 || line.rfind(name + " ", 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

}  // namespace fission::server

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace fission::server {

int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string RawExchange(int port, const std::string& bytes, int timeout_ms, int* status) {
  *status = 0;
  const int fd = ConnectTo(port);
  if (fd < 0) return "";
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buffer[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) {
      // A complete response with a body length we can see ends the wait early.
      if (reply.find("\r\n\r\n") != std::string::npos && reply.find("Content-Length: 0") != std::string::npos) break;
      continue;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    reply.append(buffer, static_cast<std::size_t>(n));
    const auto header_end = reply.find("\r\n\r\n");
    if (header_end != std::string::npos) {
      // Stop once Content-Length bytes of body have arrived.
      const auto cl = reply.find("Content-Length: ");
      if (cl != std::string::npos && cl < header_end) {
        const std::size_t length = std::stoul(reply.substr(cl + 16));
        if (reply.size() >= header_end + 4 + length) break;
      }
    }
  }
  ::close(fd);
  if (reply.rfind("HTTP/1.", 0) == 0 && reply.size() >= 12) *status = std::atoi(reply.substr(9, 3).c_str());
  return reply;
}

std::string ExchangeToClose(int port, const std::string& bytes, bool half_close, int timeout_ms) {
  const int fd = ConnectTo(port);
  if (fd < 0) return "";
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buffer[8192];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    reply.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply;
}

}  // namespace fission::server
