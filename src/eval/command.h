// `fission eval`: flags, run, table, logs and threshold, callable without the binary.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace fission::eval {

// Returns the process exit code: 0, or 1 when flexible-extract scores below --threshold. Bad
// flags or inputs throw fission::Error (exit code 2 at the CLI).
int RunEvalCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace fission::eval
