// The demo model's held-out problems as the parity tests decode them: lm-eval's three-shot gsm8k
// prompts, greedy answers through the engine under a parallel layout, and the gold answers.
#pragma once

#include <string>
#include <vector>

#include "base/json.h"
#include "model/runtime/load_options.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {

std::vector<Json> ReadJsonLines(const std::string& path);
// The gold answers ("#### N" lines) of the 500 held-out problems.
std::vector<std::string> GoldAnswers();
// lm-eval's gsm8k prompt of each held-out problem: three exemplars, then the question.
std::vector<std::string> ThreeShotPrompts();
// The demo model's greedy answers (at most 96 tokens, stopping at "Question:") under `options`.
std::vector<std::vector<std::int32_t>> DemoGreedyAnswers(const model::LoadOptions& options,
                                                         const tokenizer::Tokenizer& tokenizer,
                                                         const std::vector<std::vector<std::int32_t>>& prompts);

}  // namespace fission::server
