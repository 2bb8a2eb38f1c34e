// Turns a step plan into the model's ForwardBatch, runs the model, and says which logits row
// belongs to which sequence and purpose.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/scheduler.h"
#include "model/causal_lm.h"
#include "model/forward_batch.h"
#include "tensor/tensor.h"

namespace fission::engine {

// Where one planned sequence's logits rows are in the step's output.
struct LogitsRows {
  std::int32_t prompt_logprobs_begin = 0;  // rows for prompt positions [prompt_logprob_begin, _end)
  std::int32_t sample = -1;                // the row to sample from, or -1; a verify run's 1 + num_drafts rows start here
};

// Fills `batch` for `plan` (reusing its storage) and `rows` with one entry per plan item.
void BuildForwardBatch(const StepPlan& plan, std::int32_t page_size, model::ForwardBatch* batch,
                       std::vector<LogitsRows>* rows);

class ModelRunner {
 public:
  ModelRunner(model::CausalLM* model, std::int32_t page_size);

  // Builds the batch and runs the model: logits [rows, vocab] in fp32, on the host or left on the
  // model's device.
  model::StepLogits Run(const StepPlan& plan, std::vector<LogitsRows>* rows);
  // Data-parallel attention: one plan per group (an empty plan: the group runs an empty step);
  // each group's logits (none for an empty plan) and rows.
  std::vector<model::StepLogits> RunGroups(const std::vector<StepPlan>& plans,
                                           std::vector<std::vector<LogitsRows>>* rows);

  model::CausalLM* model() const { return model_; }
  const model::ForwardBatch& last_batch(int group = 0) const { return batches_.at(group); }

 private:
  void CheckLogits(const model::StepLogits& logits, const model::ForwardBatch& batch) const;

  model::CausalLM* model_;
  std::int32_t page_size_;
  std::vector<model::ForwardBatch> batches_;  // the last step's, one per group
};

}  // namespace fission::engine
