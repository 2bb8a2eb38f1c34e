// Turns logits rows into the next tokens of sequences (and prompt logprobs).
//
// The arithmetic is kernels::SampleOnHost's (kernels/sampling.h): penalties, min_new_tokens masks,
// a constrained sequence's allowed tokens (its TokenMatcher's mask), temperature, greedy or
// top_k/top_p/min_p sampling, logprobs. This class maps a Sequence to a
// kernels::SamplingRow and runs a step's rows where its logits are: on the host through the
// reference, or on the device through the backend's Sample. A sampled draw depends only on the
// sequence's seed and the index of the token it produces, so a sequence's output does not depend on
// what else is in the batch nor on where the logits are.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "engine/model_runner.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kernels/sampling.h"
#include "model/causal_lm.h"

namespace fission::engine {

using kernels::MixSeed;
using kernels::UniformFromSeed;

// Where a plan item's results are in Sampler::SampleStep's output.
struct ItemSamples {
  std::int32_t prompt_logprobs_begin = 0;  // one result per prompt logprob position of the item
  std::int32_t sample = -1;                // the sampled token's result, or -1
};

class Sampler {
 public:
  // `eos_token_ids` stop generation unless ignore_eos.
  explicit Sampler(std::vector<std::int32_t> eos_token_ids) : eos_token_ids_(std::move(eos_token_ids)) {}

  // Samples the next token of `seq` from host `logits[vocab_size]`. Fills `logprob` if it is not null.
  std::int32_t Sample(const float* logits, std::int64_t vocab_size, const Sequence& seq, TokenLogprob* logprob);
  // The logprob of `token` (and `top` alternatives) under the raw host logits (prompt logprobs).
  TokenLogprob Logprob(const float* logits, std::int64_t vocab_size, std::int32_t token, std::int32_t top);

  // Every row a step needs: each item's prompt logprobs, then its sample when `item.sample` and the
  // sequence has room for another token (else the item gets sample = -1). Runs on the host or on
  // the logits' backend. Verify runs (item.num_drafts > 0) are the SpeculativeVerifier's.
  void SampleStep(const StepPlan& plan, const std::vector<LogitsRows>& rows, const model::StepLogits& logits,
                  std::vector<ItemSamples>* where, std::vector<kernels::SampledToken>* results);

  // The row that samples `seq`'s next token from logits row `row`; its id lists live in `ids`.
  struct RowIds {
    std::vector<std::int32_t> seen, output_ids, output_counts, masked;
    std::vector<std::uint32_t> allowed;  // a constrained sequence's allowed tokens
  };
  // A constrained sequence's row carries its matcher's mask (plus EOS and stop tokens where the
  // output may end), which is why this is not const.
  // `ahead`: draft tokens between the sequence's end and the row (a verify run's row j is j tokens
  // ahead): the row produces output token num_output() + ahead. Only sequences that draft (no
  // penalties, no constraint: docs/engine.md) have rows ahead.
  kernels::SamplingRow MakeRow(const Sequence& seq, std::int64_t row, std::int64_t vocab_size, RowIds* ids,
                               std::int32_t ahead = 0);
  static TokenLogprob ToTokenLogprob(const kernels::SampledToken& s);
  // `rows` of `logits`, where they are (the backend's Sample, or the host reference).
  void SampleRows(const model::StepLogits& logits, std::span<const kernels::SamplingRow> rows,
                  std::vector<kernels::SampledToken>* results);
  kernels::HostSamplingScratch& host_scratch() { return scratch_; }

  const std::vector<std::int32_t>& eos_token_ids() const { return eos_token_ids_; }
  // Whether `token` ends `seq` (a stop token, or EOS unless ignore_eos) once it may stop.
  bool IsEndToken(const Sequence& seq, std::int32_t token) const;
  // Time spent computing constrained sequences' masks, and how many.
  double mask_seconds() const { return mask_seconds_; }
  std::int64_t masks() const { return masks_; }

 private:
  std::vector<std::int32_t> eos_token_ids_;
  kernels::HostSamplingScratch scratch_;
  std::deque<RowIds> step_ids_;  // a deque: rows point into its elements while more are added
  std::vector<kernels::SamplingRow> step_rows_;
  double mask_seconds_ = 0.0;
  std::int64_t masks_ = 0;
};

}  // namespace fission::engine
