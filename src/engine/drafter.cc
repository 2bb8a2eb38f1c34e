#include "engine/drafter.h"

#include <algorithm>

#include "base/error.h"

namespace fission::engine {

Drafter::Drafter(const SpeculativeConfig& config, std::int32_t page_size, std::int32_t context_length)
    : config_(config), page_size_(page_size), context_length_(context_length) {}

bool Drafter::Drafts(const Sequence& seq) {
  const SamplingParams& p = *seq.params;
  return seq.matcher == nullptr && p.repetition_penalty == 1.0 && p.frequency_penalty == 0.0 &&
         p.presence_penalty == 0.0;
}

std::int32_t Drafter::DraftCount(const Sequence& seq) const {
  if (!Drafts(seq)) return 0;
  const std::int32_t room_output = seq.params->max_new_tokens - seq.num_output() - 1;
  const std::int32_t room_context = context_length_ - seq.num_tokens() - 1;
  return std::max(0, std::min({config_.drafts(), room_output, room_context}));
}

void Drafter::AddRow(Sequence& seq, std::int32_t pos, std::int32_t token, std::int32_t hidden_row,
                     model::DraftBatch* draft) const {
  model::ForwardBatch& b = draft->batch;
  b.token_ids.push_back(token);
  b.positions.push_back(pos);
  b.kv_slots.push_back(static_cast<std::int64_t>(seq.pages[pos / page_size_]) * page_size_ + pos % page_size_);
  draft->hidden_rows.push_back(hidden_row);
}

std::vector<std::int32_t> Drafter::Argmax(const model::StepLogits& logits, Sampler& sampler) {
  rows_.assign(static_cast<std::size_t>(logits.logits.dim(0)), kernels::SamplingRow{});
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    rows_[i].row = static_cast<std::int64_t>(i);
    rows_[i].temperature = 0.0;
  }
  sampler.SampleRows(logits, rows_, &results_);
  std::vector<std::int32_t> tokens;
  for (const kernels::SampledToken& r : results_) tokens.push_back(r.token);
  return tokens;
}

void Drafter::Propose(const StepPlan& plan, const model::ForwardBatch& target, model::CausalLM& model,
                      Scheduler& scheduler, Sampler& sampler) {
  FISSION_CHECK(target.sequences.size() == plan.items.size(), "the target batch is not the plan's");
  // 1. Extend over every committed row whose next token is known, from the target's hidden states.
  // After a verify run or a one-token decode, a model that takes padded extends gets T rows a
  // sequence (model/draft_batch.h): padding rows first, at committed positions, then the
  // committed rows; every such sequence returns its last row's logits.
  const std::int32_t padded_rows = model.padded_extend_rows();
  model::DraftBatch extend;
  extend.source = model::DraftBatch::Source::kTarget;
  std::vector<Pending> pending;
  std::vector<std::int32_t> logit_of;  // pending[i]'s row among the extend's logits
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    const ScheduledSequence& item = plan.items[k];
    Sequence& seq = *item.seq;
    seq.drafts.clear();
    if (seq.status != SequenceStatus::kRunning || !Drafts(seq)) continue;
    const std::int32_t rows = item.num_new_tokens - item.num_rejected;
    const std::int32_t first = item.context_len, last = first + rows - 1;
    FISSION_CHECK(last + 1 < seq.num_tokens(), "a draft row without its next token");
    const model::SequenceSlice& run = target.sequences[k];
    const bool decode_rows = padded_rows > 0 && (run.verify || item.num_new_tokens == 1);
    const model::ExtendRows shape = model::PadExtend(first, rows, decode_rows ? padded_rows : 0);
    model::SequenceSlice slice;
    slice.query_start = extend.batch.num_tokens();
    slice.query_len = shape.size();
    slice.context_len = shape.begin();
    slice.block_table.assign(seq.pages.begin(), seq.pages.begin() + (last + page_size_) / page_size_);
    slice.state_slot = seq.state_slot;
    slice.verify = decode_rows;
    extend.batch.sequences.push_back(slice);
    for (std::int32_t p = shape.begin(); p < first; ++p) {  // padding: no KV, output dropped
      extend.batch.token_ids.push_back(0);
      extend.batch.positions.push_back(p);
      extend.batch.kv_slots.push_back(-1);
      extend.hidden_rows.push_back(run.query_start);
    }
    for (std::int32_t p = first; p <= last; ++p)
      AddRow(seq, p, seq.tokens[p + 1], run.query_start + (p - first), &extend);
    // The last row predicts the token after the sequence's last: the first draft.
    const std::int32_t count = item.sample && last + 2 == seq.num_tokens() ? DraftCount(seq) : 0;
    const std::int32_t row = extend.batch.num_tokens() - 1;
    if (count > 0 || decode_rows) extend.batch.logits_indices.push_back(row);
    if (count > 0) {
      pending.push_back({&seq, count, row});
      logit_of.push_back(static_cast<std::int32_t>(extend.batch.logits_indices.size()) - 1);
    }
  }
  if (extend.batch.token_ids.empty()) return;
  std::vector<std::int32_t> tokens = Argmax(model.ForwardDraft(extend), sampler);
  ++counters_.draft_steps;
  for (std::size_t i = 0; i < pending.size(); ++i) pending[i].seq->drafts.push_back(tokens[logit_of[i]]);

  // 2. Chain: draft d (of position num_tokens + d - 1) feeds the row at that position.
  for (std::int32_t step = 1;; ++step) {
    std::erase_if(pending, [step](const Pending& p) { return p.drafts <= step; });
    model::DraftBatch chain;
    chain.source = model::DraftBatch::Source::kDraft;
    std::vector<Pending> running;
    for (Pending& p : pending) {
      Sequence& seq = *p.seq;
      const std::int32_t pos = seq.num_tokens() + step - 2;
      if (!scheduler.ReserveFor(&seq, pos + 1)) continue;  // no page: it keeps the drafts it has
      model::SequenceSlice slice;
      slice.query_start = chain.batch.num_tokens();
      slice.query_len = 1;
      slice.context_len = pos;
      slice.block_table.assign(seq.pages.begin(), seq.pages.begin() + pos / page_size_ + 1);
      slice.state_slot = seq.state_slot;
      chain.batch.sequences.push_back(slice);
      chain.batch.logits_indices.push_back(slice.query_start);
      AddRow(seq, pos, seq.drafts.back(), p.row, &chain);
      running.push_back({p.seq, p.drafts, slice.query_start});
    }
    if (running.empty()) break;
    tokens = Argmax(model.ForwardDraft(chain), sampler);
    ++counters_.draft_steps;
    for (std::size_t i = 0; i < running.size(); ++i) running[i].seq->drafts.push_back(tokens[i]);
    pending = std::move(running);
  }
  for (const ScheduledSequence& item : plan.items) counters_.draft_tokens += static_cast<std::int64_t>(item.seq->drafts.size());
}

}  // namespace fission::engine
