// `fission bench`: bench_serving's flags, dataset, run, result block and result files, callable
// without the binary. The tokenizer is loaded through `load_tokenizer` so that the layer does not
// depend on how tokenizers are found.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace fission::tokenizer {
class Tokenizer;
}

namespace fission::serving_bench {

using TokenizerLoader = std::function<std::unique_ptr<tokenizer::Tokenizer>(const std::string& dir)>;

// Returns the exit code (0). Bad flags, inputs or an unusable server throw fission::Error.
int RunBenchCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
                    const TokenizerLoader& load_tokenizer);

}  // namespace fission::serving_bench
