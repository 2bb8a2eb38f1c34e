#include "engine/model_runner.h"

#include "base/error.h"

namespace fission::engine {

void BuildForwardBatch(const StepPlan& plan, std::int32_t page_size, model::ForwardBatch* batch,
                       std::vector<LogitsRows>* rows) {
  batch->token_ids.clear();
  batch->positions.clear();
  batch->kv_slots.clear();
  batch->logits_indices.clear();
  batch->sequences.resize(plan.items.size());
  rows->assign(plan.items.size(), LogitsRows{});
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    const ScheduledSequence& item = plan.items[k];
    const Sequence& seq = *item.seq;
    const std::int32_t start = static_cast<std::int32_t>(batch->token_ids.size());
    const std::int32_t end_pos = item.context_len + item.num_new_tokens;
    FISSION_CHECK(item.num_drafts <= static_cast<std::int32_t>(seq.drafts.size()) &&
                  end_pos <= seq.num_tokens() + item.num_drafts &&
                  static_cast<std::int64_t>(seq.pages.size()) * page_size >= end_pos);
    for (std::int32_t p = item.context_len; p < end_pos; ++p) {
      // A verify run's rows past the sequence's tokens are its drafts.
      batch->token_ids.push_back(p < seq.num_tokens() ? seq.tokens[p] : seq.drafts[p - seq.num_tokens()]);
      batch->positions.push_back(p);
      batch->kv_slots.push_back(static_cast<std::int64_t>(seq.pages[p / page_size]) * page_size + p % page_size);
    }
    model::SequenceSlice& slice = batch->sequences[k];
    slice.query_start = start;
    slice.query_len = item.num_new_tokens;
    slice.context_len = item.context_len;
    slice.block_table.assign(seq.pages.begin(), seq.pages.begin() + (end_pos + page_size - 1) / page_size);
    slice.state_slot = seq.state_slot;
    slice.verify = item.num_drafts > 0;

    LogitsRows& r = (*rows)[k];
    r.prompt_logprobs_begin = static_cast<std::int32_t>(batch->logits_indices.size());
    for (std::int32_t p = item.prompt_logprob_begin; p < item.prompt_logprob_end; ++p)
      batch->logits_indices.push_back(start + (p - item.context_len));
    if (item.sample) {
      // A verify run samples at every row: the token after its last token, then after each draft.
      r.sample = static_cast<std::int32_t>(batch->logits_indices.size());
      for (std::int32_t j = item.num_new_tokens - 1 - item.num_drafts; j < item.num_new_tokens; ++j)
        batch->logits_indices.push_back(start + j);
    }
  }
}

ModelRunner::ModelRunner(model::CausalLM* model, std::int32_t page_size)
    : model_(model), page_size_(page_size), batches_(1) {}

void ModelRunner::CheckLogits(const model::StepLogits& logits, const model::ForwardBatch& batch) const {
  const Tensor& t = logits.logits;
  FISSION_CHECK(t.dtype == DType::kF32 && t.rank() == 2 &&
                    t.dim(0) == static_cast<std::int64_t>(batch.logits_indices.size()) &&
                    t.dim(1) == model_->vocab_size(),
                "the model returned logits of shape ", t.shape.ToString());
}

model::StepLogits ModelRunner::Run(const StepPlan& plan, std::vector<LogitsRows>* rows) {
  BuildForwardBatch(plan, page_size_, &batches_[0], rows);
  model::StepLogits logits = model_->Forward(batches_[0]);
  CheckLogits(logits, batches_[0]);
  return logits;
}

std::vector<model::StepLogits> ModelRunner::RunGroups(const std::vector<StepPlan>& plans,
                                                      std::vector<std::vector<LogitsRows>>* rows) {
  if (plans.size() == 1) {
    rows->resize(1);
    std::vector<model::StepLogits> logits;
    logits.push_back(Run(plans[0], &(*rows)[0]));
    return logits;
  }
  batches_.resize(plans.size());
  rows->resize(plans.size());
  for (std::size_t g = 0; g < plans.size(); ++g) BuildForwardBatch(plans[g], page_size_, &batches_[g], &(*rows)[g]);
  std::vector<model::StepLogits> logits = model_->ForwardGroups(batches_);
  FISSION_CHECK(logits.size() == plans.size(), "the model returned logits of ", logits.size(), " groups for ",
                plans.size());
  for (std::size_t g = 0; g < plans.size(); ++g)
    if (!plans[g].empty()) CheckLogits(logits[g], batches_[g]);
  return logits;
}

}  // namespace fission::engine
