// The `fission` commands. Each command lives in its own file and registers itself with
// FISSION_COMMAND, so adding a command touches no shared list.
#pragma once

#include <string>
#include <vector>

namespace fission::cli {

using CommandFn = int (*)(const std::vector<std::string>& args);

struct Command {
  const char* name;
  const char* summary;  // one line for `fission --help`
  CommandFn run;
};

// Every registered command, in the order `fission --help` lists them.
std::vector<Command> AllCommands();

struct CommandRegistration {
  CommandRegistration(const char* name, const char* summary, CommandFn run);
};

}  // namespace fission::cli

#define FISSION_COMMAND(name, summary, fn) \
  static const ::fission::cli::CommandRegistration fission_command_registration_##fn(name, summary, fn)
