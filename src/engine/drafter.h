// Speculative decoding's draft steps: after a target step (its tokens committed and appended),
// the model's draft layer extends over the step's committed rows, reading the target's hidden
// states, and its last row of each sequence that will decode next gives the first draft; further
// chained draft steps of one row per sequence give the others (model/draft_batch.h). Draft tokens
// are the draft logits' argmax (EAGLE with topk 1). A draft row writes the draft layer's cache at
// its position, so chained rows beyond the sequence's tokens get pages first; a sequence that
// finds none drafts fewer tokens. After a verify run the extend takes the model's fixed shape when
// it has one (CausalLM::padded_extend_rows: padding rows before the committed ones, so that a
// captured graph runs it), and the drafts come from each sequence's last row as before.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine_config.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "model/causal_lm.h"

namespace fission::engine {

struct DraftCounters {
  std::int64_t draft_steps = 0;   // ForwardDraft calls
  std::int64_t draft_tokens = 0;  // draft tokens proposed
};

class Drafter {
 public:
  Drafter(const SpeculativeConfig& config, std::int32_t page_size, std::int32_t context_length);

  // Whether `seq` drafts at all: a sequence with penalties or a constraint decodes plainly (its
  // rows would depend on the drafts before them).
  static bool Drafts(const Sequence& seq);
  // How many drafts `seq` gets now: num_steps, fewer near max_new_tokens or the context length (a
  // verify run emits at most drafts + 1 tokens).
  std::int32_t DraftCount(const Sequence& seq) const;

  // Runs the draft steps after target step `plan` (whose batch was `target`) and sets the drafts of
  // its running sequences.
  void Propose(const StepPlan& plan, const model::ForwardBatch& target, model::CausalLM& model,
               Scheduler& scheduler, Sampler& sampler);

  const DraftCounters& counters() const { return counters_; }

 private:
  // A sequence waiting for its next draft, and the row of the last draft step that feeds it.
  struct Pending {
    Sequence* seq;
    std::int32_t drafts;  // how many it gets
    std::int32_t row;
  };
  // Appends row `pos` of `seq` (input token `token`, hidden row `hidden_row`) to `batch`.
  void AddRow(Sequence& seq, std::int32_t pos, std::int32_t token, std::int32_t hidden_row,
              model::DraftBatch* batch) const;
  // The argmax of each logits row.
  std::vector<std::int32_t> Argmax(const model::StepLogits& logits, Sampler& sampler);

  SpeculativeConfig config_;
  std::int32_t page_size_;
  std::int32_t context_length_;
  DraftCounters counters_;
  std::vector<kernels::SamplingRow> rows_;
  std::vector<kernels::SampledToken> results_;
};

}  // namespace fission::engine
