#include "common/child_process.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "base/error.h"

namespace fission::testing_util {

Child SpawnWithLog(const std::vector<std::string>& argv, const std::string& log_prefix, const ChildLimits& limits) {
  FISSION_CHECK(!argv.empty(), "SpawnWithLog needs a program");
  // The log is created here, before the fork, with a name nobody else holds: a name built from the
  // pid alone can be a stale file of an earlier process with a reused pid, whose address line
  // WaitForListeningPort would read before the child truncates it.
  std::string path = StrCat(::testing::TempDir(), "/", log_prefix, "_", ::getpid(), "_XXXXXX");
  const int log_fd = ::mkstemp(path.data());
  FISSION_CHECK(log_fd >= 0, "cannot create a log file from ", path);
  Child child;
  child.log_path = path;
  std::vector<std::string> args = argv;
  child.pid = ::fork();
  FISSION_CHECK(child.pid >= 0, "fork failed");
  if (child.pid == 0) {
    std::vector<char*> cargv;
    for (std::string& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    if (limits.open_files_soft > 0) {
      const rlimit files{limits.open_files_soft, limits.open_files_hard};
      if (::setrlimit(RLIMIT_NOFILE, &files) != 0) std::_Exit(126);
    }
    if (::dup2(log_fd, 1) < 0 || ::dup2(log_fd, 2) < 0) std::_Exit(126);
    ::close(log_fd);
    ::execv(cargv[0], cargv.data());
    std::_Exit(127);
  }
  ::close(log_fd);
  return child;
}

bool ChildAlive(pid_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 && ::waitpid(pid, nullptr, WNOHANG) == 0;
}

int WaitForListeningPort(const Child& child, int timeout_s) {
  const std::regex address(R"(on http://[^:]+:(\d+))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(child.log_path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    std::smatch m;
    if (std::regex_search(s, m, address)) return std::stoi(m[1]);
    if (!ChildAlive(child.pid)) Fail(child.log_path, ": the process exited before it was ready:\n", s);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Fail(child.log_path, ": the process did not start within ", timeout_s, " s");
}

}  // namespace fission::testing_util
