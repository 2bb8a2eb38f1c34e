// The datasets of sglang.bench_serving that Fission draws exactly as it does, from the same seed:
// `random-ids` (token ids from numpy's generator), `sharegpt` (a local ShareGPT JSON file, shuffled
// by Python's generator; nothing is downloaded) and `generated-shared-prefix` (groups of prompts
// that share a system prompt). Lengths follow bench_serving's compute_random_lens:
// np.random.randint(max(int(L * ratio), 1), L + 1).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "serving_bench/metrics.h"

namespace fission::tokenizer {
class Tokenizer;
}

namespace fission::serving_bench {

struct RandomIdsOptions {
  int num_prompts = 1000;
  std::int64_t input_len = 1024;
  std::int64_t output_len = 1024;
  double range_ratio = 0.0;
  std::uint32_t seed = 1;
  bool keep_ids = false;  // --tokenize-prompt: send the ids instead of their decoded text
};

// Prompt i is the ids (offset_i + i + j) mod V for j < input_len_i, V the tokenizer's vocabulary
// without added tokens (transformers' vocab_size); prompt_len is input_len_i, as bench_serving
// counts it. Draw order: input lengths, output lengths, offsets.
std::vector<DatasetRow> SampleRandomIdsRequests(const RandomIdsOptions& options, const tokenizer::Tokenizer& tok);

struct ShareGptOptions {
  std::string path;  // a JSON array of {"conversations": [{"from", "value"}, ...]}
  int num_prompts = 1000;
  std::optional<std::int64_t> fixed_output_len;  // --sharegpt-output-len
  std::optional<std::int64_t> context_len;       // --sharegpt-context-len
  std::uint32_t seed = 1;
};

// The first two turns of each conversation with at least two, shuffled by random.shuffle with
// random.seed(seed); the first num_prompts whose prompt and completion encode to at least 2
// tokens (and fit context_len) are kept. `wrap` (the chat template, or identity) is applied to each
// prompt before it is measured. Errors name the file and the entry.
std::vector<DatasetRow> SampleShareGptRequests(const ShareGptOptions& options, const tokenizer::Tokenizer& tok,
                                               const std::function<std::string(const std::string&)>& wrap);

struct SharedPrefixOptions {
  int num_groups = 64;
  int prompts_per_group = 16;
  std::int64_t system_prompt_len = 2048;
  std::int64_t question_len = 128;
  std::int64_t output_len = 256;
  double range_ratio = 1.0;
  bool ordered = false;  // --gsp-ordered: keep group order instead of shuffling
  std::uint32_t seed = 1;
};

// Per group a system prompt of random tokens, per prompt a question of random tokens, joined as
// "{system}\n\n{question}" and measured with the tokenizer; shuffled unless ordered. Tokens are
// drawn by random.choices over the vocabulary in id order (bench_serving draws over
// get_vocab().values(), whose order is the tokenizer library's, so the texts differ; the lengths
// and the shuffle are the same).
std::vector<DatasetRow> SampleSharedPrefixRequests(const SharedPrefixOptions& options, const tokenizer::Tokenizer& tok);

}  // namespace fission::serving_bench
