// `fission eval`: the gsm8k accuracy harness (src/eval).
#include <iostream>

#include "cli/commands.h"
#include "eval/command.h"

namespace fission::cli {

int RunEval(const std::vector<std::string>& args) { return eval::RunEvalCommand(args, std::cout, std::cerr); }

}  // namespace fission::cli
