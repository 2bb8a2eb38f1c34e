// `fission eval`: the gsm8k accuracy harness (src/eval).
#include <iostream>

#include "cli/commands.h"
#include "eval/command.h"

namespace fission::cli {

namespace {

int RunEval(const std::vector<std::string>& args) { return eval::RunEvalCommand(args, std::cout, std::cerr); }

}  // namespace

FISSION_COMMAND("eval", "gsm8k accuracy with lm-eval's semantics", RunEval);

}  // namespace fission::cli
