// The tokenizer test corpus: the committed strings and gsm8k rows, and the golden files recorded
// from the reference.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"

namespace fission::tokenizer::testing {

std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);
// tests/fixtures/tokenizer/corpus.jsonl, one string a line.
std::vector<std::string> CommittedCorpus();
// Question and answer strings of the first `rows` rows of gsm8k's `file` (in line order).
std::vector<std::string> Gsm8kStrings(const std::string& file, int rows);
// Whether gsm8k's `file` is there (../shared/datasets/gsm8k, next to the repository).
bool HaveGsm8k(const std::string& file);
// A JSON-lines file parsed line by line.
std::vector<Json> ReadJsonLines(const std::string& path);

}  // namespace fission::tokenizer::testing
