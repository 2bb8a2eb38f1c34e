#include "cli/commands.h"

namespace fission::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {"bench", RunBench},
      {"eval", RunEval},
  };
  return kCommands;
}

}  // namespace fission::cli
