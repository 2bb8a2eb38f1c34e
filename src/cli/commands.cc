#include "cli/commands.h"

namespace fission::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> kCommands = {
      {"model", RunModel},
      {"generate", RunGenerate},
      {"catalog", RunCatalog},
  };
  return kCommands;
}

const char* CommandSummary(const std::string& name) {
  static const std::pair<const char*, const char*> kSummaries[] = {
      {"serve", "the OpenAI-compatible server (SGLang's launch flags)"},
      {"generate", "offline inference from the command line or a JSON-lines file"},
      {"bench", "the serving benchmark client (sglang.bench_serving's output)"},
      {"eval", "the gsm8k accuracy harness (lm-eval's semantics)"},
      {"catalog", "expand, list, run and report a benchmark catalog"},
      {"model", "inspect a checkpoint"},
      {"tokenize", "encode, decode or render a chat with a model's tokenizer"},
  };
  for (const auto& [command, summary] : kSummaries)
    if (name == command) return summary;
  return "";
}

}  // namespace fission::cli
