// Child processes for `fission catalog run`: a shell command in its own session (so its whole
// process tree forms one process group), output to a log file, bounded waits, and a stop that sends
// SIGTERM to the group, then SIGKILL after a grace period. Nothing is left running: the destructor
// stops a group that is still alive.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "catalog/catalog.h"

namespace fission::catalog {

class Subprocess {
 public:
  // Runs `/bin/sh -c command` with this process's environment plus `env` (which overrides), stdin
  // from /dev/null, stdout and stderr appended to `log_path`. An Error when it cannot start.
  Subprocess(const std::string& command, const std::vector<EnvVar>& env, const std::string& log_path);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Polls without blocking; true while the shell (the group leader) has not exited.
  bool Running();
  // Waits up to `timeout` (or until `*cancel` becomes true) for the leader to exit. Returns its exit
  // code (128 + signal when killed by one), or nullopt when still running. After the leader exits,
  // anything left in its group is killed.
  std::optional<int> Wait(std::chrono::milliseconds timeout, const std::atomic<bool>* cancel = nullptr);
  // SIGTERM to the group, up to `grace` for every process of the group to exit, then SIGKILL to the
  // group. Returns the leader's exit code; killed() tells whether SIGKILL was needed.
  int Stop(std::chrono::milliseconds grace);
  std::optional<int> exit_code() const { return exit_code_; }
  bool killed() const { return killed_; }

 private:
  bool Reap();  // collects the leader's status without blocking; true once it exited
  bool GroupAlive() const;
  bool WaitGroupGone(std::chrono::milliseconds timeout);
  void KillGroup(int signal);
  void SweepGroup();

  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  bool killed_ = false;
};

// The last `lines` lines of a text file ("" when it cannot be read).
std::string TailFile(const std::string& path, size_t lines);

// GET http://127.0.0.1:{port}{path} with a bounded timeout; true on an HTTP 200 answer.
bool HttpGetOk(int port, const std::string& path, std::chrono::milliseconds timeout);

// A TCP port on 127.0.0.1 that was free a moment ago.
int PickFreePort();

// The absolute path of the running executable.
std::string SelfExecutable();

// Set by SIGINT/SIGTERM once InstallStopHandlers() ran; long waits watch it.
std::atomic<bool>& StopRequested();
void InstallStopHandlers();

}  // namespace fission::catalog
