// Turns one logits row into the next token of one sequence.
//
// The order of operations: repetition, frequency and presence penalties; min_new_tokens masks EOS
// and stop tokens; temperature; then greedy argmax (temperature 0) or sampling after top_k, top_p
// and min_p. Logprobs are the log-softmax of the logits after penalties and temperature (before
// top_k/top_p/min_p truncation). A sampled draw depends only on the sequence's seed and the index
// of the token it produces, so a sequence's output does not depend on what else is in the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/request.h"

namespace fission::engine {

// A uniform double in [0, 1) from a seed and a counter (stateless, so it is reproducible).
double UniformFromSeed(std::uint64_t seed, std::uint64_t counter);
// Mixes two 64-bit values into a seed.
std::uint64_t MixSeed(std::uint64_t a, std::uint64_t b);

class Sampler {
 public:
  // `eos_token_ids` stop generation unless ignore_eos.
  explicit Sampler(std::vector<std::int32_t> eos_token_ids) : eos_token_ids_(std::move(eos_token_ids)) {}

  // Samples the next token of `seq` from `logits[vocab_size]`. Fills `logprob` if it is not null.
  std::int32_t Sample(const float* logits, std::int64_t vocab_size, const Sequence& seq, TokenLogprob* logprob);

  // The logprob of `token` (and `top` alternatives) under the raw logits (prompt logprobs).
  TokenLogprob Logprob(const float* logits, std::int64_t vocab_size, std::int32_t token, std::int32_t top);

  const std::vector<std::int32_t>& eos_token_ids() const { return eos_token_ids_; }

 private:
  std::vector<std::int32_t> eos_token_ids_;
  std::vector<float> scratch_;
  std::vector<double> probs_;
  std::vector<std::int32_t> order_;
};

}  // namespace fission::engine
