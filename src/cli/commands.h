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
// One line describing a command, for `fission --help`.
const char* CommandSummary(const std::string& name);
int RunCatalog(const std::vector<std::string>& args);

int RunModel(const std::vector<std::string>& args);
int RunGenerate(const std::vector<std::string>& args);


}  // namespace fission::cli
