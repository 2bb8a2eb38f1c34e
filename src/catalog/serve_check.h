// Which cells' server commands `fission serve` would refuse, found before anything runs: the
// server's own flag checks (handed in by the command line, since this layer does not link the
// server) run on the arguments each cell's server command gives `fission serve`, without loading
// a model.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "catalog/expansion.h"

namespace fission::catalog {

// "" when `fission serve` accepts `args` (the words after `serve`), else its reason.
using ServeFlagCheck = std::function<std::string(const std::vector<std::string>& args)>;

// The words of a shell command line as /bin/sh splits them: blanks separate words, '...' is
// literal, "..." keeps its text with \" \\ \$ \` escapes, a backslash outside quotes escapes the
// next character. Nothing is expanded. An unclosed quote is an Error naming `where`.
std::vector<std::string> ShellWords(const std::string& text, const std::string& where);

// For each cell whose server command (the template `server_cmd`, expanded with the cell's values)
// runs `{fission} serve`, sets serve_checked and serve_refusal from `check`. Cells of other server
// commands stay unchecked.
void CheckServeCommands(std::vector<Cell>& cells, const std::string& server_cmd, const std::string& models_root,
                        const std::string& model_override_args, const ServeFlagCheck& check);

// "N of M cells would be refused by fission serve:" and one line per distinct reason, or "".
std::string RefusalSummary(const std::vector<Cell>& cells);

}  // namespace fission::catalog
