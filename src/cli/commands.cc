#include "cli/commands.h"

#include <algorithm>
#include <cstring>

namespace fission::cli {
namespace {

std::vector<Command>& Registry() {
  static std::vector<Command> commands;
  return commands;
}

// The order of `fission --help`: the main job first, the tools next, the helpers last.
int Rank(const char* name) {
  static const char* kOrder[] = {"serve", "generate", "bench", "eval", "catalog", "model", "tokenize"};
  for (int i = 0; i < static_cast<int>(std::size(kOrder)); ++i)
    if (std::strcmp(kOrder[i], name) == 0) return i;
  return static_cast<int>(std::size(kOrder));
}

}  // namespace

CommandRegistration::CommandRegistration(const char* name, const char* summary, CommandFn run) {
  Registry().push_back({name, summary, run});
}

std::vector<Command> AllCommands() {
  std::vector<Command> commands = Registry();
  std::stable_sort(commands.begin(), commands.end(),
                   [](const Command& a, const Command& b) { return Rank(a.name) < Rank(b.name); });
  return commands;
}

}  // namespace fission::cli
