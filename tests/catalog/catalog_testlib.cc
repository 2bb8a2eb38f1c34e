#include "catalog/catalog_testlib.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "base/mapped_file.h"
#include "catalog/command_template.h"
#include "catalog/process.h"

namespace fission::catalog {

namespace fs = std::filesystem;

Catalog ParseTestCatalog(const std::string& text) { return ParseCatalog(Json::parse(text), "test.json"); }

std::string TestCatalogError(const std::string& text) {
  try {
    ParseTestCatalog(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string MakeTempDir(const std::string& name) {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(FISSION_BINARY_DIR) / "test-tmp" / "catalog" /
                       StrCat(name, "-", ::getpid(), "-", counter++);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

bool WaitForFile(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    if (fs::exists(path, ec) && fs::file_size(path, ec) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool WaitForText(const std::string& path, const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    if (s.str().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool ProcessAlive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return false;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

bool WaitUntilDead(int pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (ProcessAlive(pid)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string FissionBinary() { return std::string(FISSION_BINARY_DIR) + "/fission"; }
std::string TestExecutable() { return SelfExecutable(); }

CommandResult RunFission(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                         std::chrono::milliseconds timeout) {
  std::string command = ShellQuote(FissionBinary());
  for (const std::string& a : args) {
    command += ' ';
    command += ShellQuote(a);
  }
  std::vector<EnvVar> vars;
  for (const auto& [k, v] : env) vars.push_back({k, v});
  const std::string log = MakeTempDir("fission-cli") + "/output.txt";
  Subprocess p(command, vars, log);
  CommandResult r;
  const std::optional<int> code = p.Wait(timeout);
  r.code = code ? *code : p.Stop(std::chrono::milliseconds(5000));
  r.output = ReadFile(log);
  if (!code) r.output += "\n[test: command timed out]\n";
  return r;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

struct FakeHttpServer::State {
  std::mutex mu;
  std::string last_path;
  std::atomic<bool> stop{false};
};

FakeHttpServer::FakeHttpServer(int status) : status_(status), state_(new State) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  FISSION_CHECK(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  FISSION_CHECK(::listen(fd_, 16) == 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] {
    while (!state_->stop.load()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) != 1) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string request;
      char buf[1024];
      while (request.find("\r\n\r\n") == std::string::npos) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 2000) != 1) break;
        const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        const size_t sp = request.find(' ');
        const size_t sp2 = request.find(' ', sp + 1);
        if (sp != std::string::npos && sp2 != std::string::npos) state_->last_path = request.substr(sp + 1, sp2 - sp - 1);
      }
      const std::string response =
          StrCat("HTTP/1.1 ", status_, " Status\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      ::send(c, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  });
}

FakeHttpServer::~FakeHttpServer() {
  state_->stop.store(true);
  thread_.join();
  ::close(fd_);
  delete state_;
}

std::string FakeHttpServer::last_path() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->last_path;
}

}  // namespace fission::catalog
