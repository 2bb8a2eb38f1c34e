// `fission <command>`: dispatches to the command's own file. A user error (fission::Error) prints one
// line and exits with code 2.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"

namespace {

void PrintUsage() {
  std::printf("usage: fission <command> [options]\n\ncommands:\n");
  for (const fission::cli::Command& c : fission::cli::AllCommands())
    std::printf("  %-10s %s\n", c.name, c.summary);
  std::printf("\nRun `fission <command> --help` for a command's options.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    for (const fission::cli::Command& c : fission::cli::AllCommands()) {
      if (command == c.name) return c.run(args);
    }
    std::fprintf(stderr, "fission: unknown command '%s'\n", command.c_str());
    PrintUsage();
    return 2;
  } catch (const fission::Error& e) {
    std::fprintf(stderr, "fission %s: error: %s\n", command.c_str(), e.what());
    return 2;
  }
}
