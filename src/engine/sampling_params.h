// Per-request sampling parameters and their validation.
//
// Names and defaults follow SGLang's sampling parameters. Validate() rejects an invalid value with a
// fission::Error naming the field and its allowed range.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/token_constraint.h"

namespace fission::engine {

// The largest number of alternatives a logprobs entry may carry.
inline constexpr int kMaxTopLogprobs = 20;

struct SamplingParams {
  // 0 means greedy (argmax). Otherwise logits are divided by it before softmax.
  double temperature = 1.0;
  // Nucleus sampling: keep the smallest set of most likely tokens whose probability reaches top_p.
  double top_p = 1.0;
  // Keep the top_k most likely tokens; -1 (or 0) keeps all.
  std::int32_t top_k = -1;
  // Keep tokens whose probability is at least min_p times the most likely token's.
  double min_p = 0.0;
  // Seeds the request's sampler; without one the engine derives a seed from --random-seed and the
  // request id. The same seed gives the same tokens whatever else is in the batch.
  std::optional<std::uint64_t> seed;

  std::int32_t max_new_tokens = 128;
  // Until this many tokens are generated, EOS and stop tokens are masked and stop strings ignored.
  std::int32_t min_new_tokens = 0;
  // Generation stops when the output text contains one of these; the match is excluded from the text.
  std::vector<std::string> stop;
  std::vector<std::int32_t> stop_token_ids;
  // Keep generating after EOS tokens.
  bool ignore_eos = false;
  // Number of independent completions of the prompt.
  std::int32_t n = 1;

  // > 1 discourages tokens already in the prompt or the output (logit / p if positive, * p if not).
  double repetition_penalty = 1.0;
  // Subtracted from a token's logit once per occurrence in the output.
  double frequency_penalty = 0.0;
  // Subtracted from a token's logit if it occurs in the output.
  double presence_penalty = 0.0;

  // Return the log-probability of every generated token, with `top_logprobs` alternatives.
  bool logprobs = false;
  std::int32_t top_logprobs = 0;
  // Return the log-probability of every prompt token after the first (for `echo`).
  bool prompt_logprobs = false;

  // Structured outputs: the tokens each step may produce (null: any). Logprobs are then those of
  // the constrained distribution.
  using ConstraintPtr = std::shared_ptr<const TokenConstraint>;
  ConstraintPtr constraint;

  // Throws fission::Error naming the field and its allowed range. `vocab_size` bounds token ids.
  void Validate(std::int64_t vocab_size) const;

  bool greedy() const { return temperature == 0.0; }
};

}  // namespace fission::engine
