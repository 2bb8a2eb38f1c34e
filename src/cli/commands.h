// The table of `fission` commands. Each command lives in its own file and registers here.
#pragma once

#include <string>
#include <vector>

namespace fission::cli {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& AllCommands();

int RunBench(const std::vector<std::string>& args);
int RunEval(const std::vector<std::string>& args);


}  // namespace fission::cli
