#include "catalog/process.h"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <deque>
#include <filesystem>
#include <sstream>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include "base/log.h"

extern char** environ;

namespace fission::catalog {
namespace {

using Clock = std::chrono::steady_clock;

int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

void OnStopSignal(int) { StopRequested().store(true); }

// Processes of group `pgid` that have not exited (zombies excluded).
int LiveGroupMembers(pid_t pgid) {
  int count = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 1));
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (!(rest >> state >> ppid >> pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') ++count;
  }
  return count;
}

// Orphans of the process groups started here are re-parented to this process, so they can be reaped
// instead of lingering as zombies.
void BecomeSubreaper() {
  static const bool done = [] {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    return true;
  }();
  (void)done;
}

}  // namespace

Subprocess::Subprocess(const std::string& command, const std::vector<EnvVar>& env, const std::string& log_path) {
  BecomeSubreaper();
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const EnvVar& v : env) overridden = overridden || v.name == name;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const EnvVar& v : env) env_strings.push_back(v.name + "=" + v.value);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string sh = "/bin/sh", dash_c = "-c", cmd = command;
  char* argv[] = {sh.data(), dash_c.data(), cmd.data(), nullptr};

  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) Fail("cannot open log file '", log_path, "': ", std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    Fail("cannot open /dev/null: ", std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(null_fd);
    Fail("cannot start '", command, "': fork failed: ", std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::close_range(3, ~0U, 0);
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  // Also set the group from this side, so a kill right after fork already reaches it.
  ::setpgid(pid, pid);
  ::close(log_fd);
  ::close(null_fd);
  pid_ = pid;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !exit_code_) Stop(std::chrono::milliseconds(2000));
}

void Subprocess::KillGroup(int signal) {
  if (pid_ > 0) ::kill(-pid_, signal);
}

void Subprocess::SweepGroup() {
  // The leader is gone; whatever it left in its group goes too.
  KillGroup(SIGKILL);
}

bool Subprocess::Reap() {
  if (exit_code_) return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_code_ = DecodeStatus(status);
    return true;
  }
  return false;
}

bool Subprocess::GroupAlive() const {
  if (pid_ <= 0) return false;
  // Orphaned members became children of this process (a subreaper): collect the exited ones.
  int status = 0;
  while (::waitpid(-pid_, &status, WNOHANG) > 0) {
  }
  // Zombies still count for kill(-pgid, 0), so the members are looked up in /proc instead.
  return LiveGroupMembers(pid_) > 0;
}

bool Subprocess::Running() {
  if (exit_code_) return false;
  if (!Reap()) return true;
  SweepGroup();
  return false;
}

std::optional<int> Subprocess::Wait(std::chrono::milliseconds timeout, const std::atomic<bool>* cancel) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (!Running()) return exit_code_;
    if ((cancel && cancel->load()) || Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool Subprocess::WaitGroupGone(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const bool reaped = Reap();
    if (reaped && !GroupAlive()) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int Subprocess::Stop(std::chrono::milliseconds grace) {
  // The whole group gets SIGTERM and the grace period to exit: the shell leader may go at once while
  // the server it started is still shutting down.
  KillGroup(SIGTERM);
  if (!WaitGroupGone(grace)) {
    killed_ = true;
    Log(LogLevel::kWarning, "process group ", pid_, " still running ", grace.count(),
        " ms after SIGTERM; sending SIGKILL");
    KillGroup(SIGKILL);
    if (!WaitGroupGone(std::chrono::milliseconds(10000))) {
      Log(LogLevel::kError, "process group ", pid_, " did not exit after SIGKILL");
    }
  }
  if (!exit_code_) exit_code_ = 128 + SIGKILL;
  return *exit_code_;
}

std::string TailFile(const std::string& path, size_t lines) {
  std::ifstream in(path);
  if (!in) return "";
  std::deque<std::string> last;
  std::string line;
  while (std::getline(in, line)) {
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += l + "\n";
  return out;
}

bool HttpGetOk(int port, const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto remaining_ms = [&] {
    return static_cast<int>(std::max<std::int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
  };
  Fd sock(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return false;
  sockaddr_in addr = Loopback(port);
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) return false;
    pollfd p{sock.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return false;
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{sock.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return false;
    const ssize_t n = ::send(sock.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  std::string response;
  while (response.find("\r\n") == std::string::npos && response.size() < 4096) {
    pollfd p{sock.get(), POLLIN, 0};
    if (::poll(&p, 1, remaining_ms()) != 1) return false;
    char buf[512];
    const ssize_t n = ::recv(sock.get(), buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  // "HTTP/1.x 200 ..."
  return response.rfind("HTTP/1.", 0) == 0 && response.size() >= 12 && response.compare(9, 3, "200") == 0;
}

int PickFreePort() {
  Fd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) Fail("cannot create a socket: ", std::strerror(errno));
  sockaddr_in addr = Loopback(0);
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Fail("cannot bind a loopback port: ", std::strerror(errno));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

std::string SelfExecutable() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  FISSION_CHECK(n > 0, "readlink /proc/self/exe failed");
  return std::string(buf, static_cast<size_t>(n));
}

std::atomic<bool>& StopRequested() {
  static std::atomic<bool> requested{false};
  return requested;
}

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace fission::catalog
