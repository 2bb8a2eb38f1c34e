// Speculative decoding's verification: the tokens each verify run of a step emits, from the
// target's logits at its rows (engine/speculative_acceptance.h has the rule). Greedy runs are
// sampled where the logits are (the backend's Sample, as plain decoding samples), so they emit
// exactly the tokens and logprobs plain greedy decoding would; sampled runs copy their rows to the
// host for rejection sampling. Accepting all (--speculative-accept-all-for-benchmark) keeps every
// draft of every run: each run emits its drafts (their logprobs under the target's rows) and the
// target's token after them, sampled where the logits are.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/causal_lm.h"

namespace fission::engine {

struct VerifiedRun {
  // The accepted drafts, then the target's own token (logprobs filled when the request asks).
  std::vector<kernels::SampledToken> tokens;
  std::int32_t accepted = 0;
};

class SpeculativeVerifier {
 public:
  explicit SpeculativeVerifier(bool accept_all = false) : accept_all_(accept_all) {}

  // One entry per plan item; items that are not verify runs (num_drafts 0) get an empty one.
  void Verify(const StepPlan& plan, const std::vector<LogitsRows>& rows, const model::StepLogits& logits,
              Sampler& sampler, std::vector<VerifiedRun>* out);

 private:
  // Greedy runs (every run when accepting all), sampled where the logits are.
  void VerifyGreedy(const StepPlan& plan, const std::vector<LogitsRows>& rows, const model::StepLogits& logits,
                    Sampler& sampler, std::vector<VerifiedRun>* out);
  void VerifySampled(const ScheduledSequence& item, const LogitsRows& rows, const float* host_logits,
                     std::int64_t vocab, Sampler& sampler, VerifiedRun* out);

  bool accept_all_;
  std::deque<Sampler::RowIds> ids_;
  std::vector<kernels::SamplingRow> rows_;
  std::vector<kernels::SampledToken> results_;
};

}  // namespace fission::engine
