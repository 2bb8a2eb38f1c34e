// Test helper: a child process whose stdout and stderr go to a fresh log file, and the wait for
// the "listening on http://host:port" line a server prints when it is ready.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fission::testing_util {

struct ChildLimits {
  std::uint64_t open_files_soft = 0;  // 0: inherited
  std::uint64_t open_files_hard = 0;
};

struct Child {
  pid_t pid = -1;
  std::string log_path;  // a new empty file per child, under the test temp dir
};

// Forks and execs argv[0] with argv, its output going to a log named after `log_prefix`.
Child SpawnWithLog(const std::vector<std::string>& argv, const std::string& log_prefix, const ChildLimits& limits = {});

// Polls the child's log until it prints its address and returns the port; throws fission::Error
// with the log when the child exits first or `timeout_s` passes.
int WaitForListeningPort(const Child& child, int timeout_s);

// Whether the child is still running (reaps it when it is not).
bool ChildAlive(pid_t pid);

}  // namespace fission::testing_util
