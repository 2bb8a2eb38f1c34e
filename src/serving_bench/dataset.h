// Benchmark prompts: the seeded random dataset of bench_serving / vllm bench serve, and prompts
// from a JSON-lines file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "serving_bench/metrics.h"

namespace fission::tokenizer {
class Tokenizer;
}

namespace fission::serving_bench {

struct RandomDatasetOptions {
  int num_prompts = 1000;
  std::int64_t input_len = 1024;
  std::int64_t output_len = 1024;
  double range_ratio = 0.0;
  std::int64_t prefix_len = 0;
  std::uint64_t seed = 1;
  // Decode/re-encode rounds before a prompt keeps whatever length it measured.
  int max_fit_rounds = 10;
};

// Per prompt: input and output lengths uniform over the integers [max(1, floor(L*r)), L]; token ids
// (offset + i + j) mod vocab from a random offset, special tokens skipped; the decoded text re-encoded and padded with
// random ids or truncated until it is exactly prefix_len + input_len tokens (bounded rounds; the
// measured length is kept when it does not converge). With prefix_len > 0 every prompt starts with
// the same text of prefix_len tokens. Bad options throw fission::Error.
std::vector<DatasetRow> SampleRandomRequests(const RandomDatasetOptions& options, const tokenizer::Tokenizer& tok);

// One JSON object per line: {"prompt": "...", "output_len": N (optional), "prompt_len": N
// (optional; measured with the tokenizer when absent)}, or a token-id prompt {"prompt_ids": [...],
// "output_len": N} that is sent as those ids (prompt_len is their count; a "prompt" beside them is
// kept as the text). Errors name the file and line.
std::vector<DatasetRow> LoadJsonlRequests(const std::string& path, int num_prompts, std::int64_t default_output_len,
                                          const tokenizer::Tokenizer* tok);

// "#Input tokens: N\n#Output tokens: M\n" (as bench_serving prints them) and min/mean/max lines.
std::string DescribeLengths(const std::vector<DatasetRow>& rows);

}  // namespace fission::serving_bench
