#include "cli/commands.h"

namespace fission::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {"model", RunModel},
      {"generate", RunGenerate},
      {"tokenize", RunTokenize},
  };
  return kCommands;
}

}  // namespace fission::cli
