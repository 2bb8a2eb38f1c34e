// `fission bench`: the serving benchmark (src/bench), with tokenizers loaded from HF folders.
#include <iostream>

#include "serving_bench/command.h"
#include "cli/commands.h"
#include "tokenizer/tokenizer.h"

namespace fission::cli {

namespace {

int RunBench(const std::vector<std::string>& args) {
  return serving_bench::RunBenchCommand(args, std::cout, std::cerr,
                                [](const std::string& dir) { return tokenizer::Tokenizer::Load(dir); });
}

}  // namespace

FISSION_COMMAND("bench", "the serving benchmark (sglang.bench_serving's flags and report)", RunBench);

}  // namespace fission::cli
