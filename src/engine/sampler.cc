#include "engine/sampler.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "kernels/backend.h"

namespace fission::engine {

bool Sampler::IsEndToken(const Sequence& seq, std::int32_t token) const {
  const SamplingParams& p = *seq.params;
  return std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end() ||
         (!p.ignore_eos && std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end());
}

kernels::SamplingRow Sampler::MakeRow(const Sequence& seq, std::int64_t row, std::int64_t vocab_size, RowIds* ids,
                                      std::int32_t ahead) {
  const SamplingParams& p = *seq.params;
  kernels::SamplingRow r;
  r.row = row;
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.repetition_penalty = p.repetition_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.presence_penalty = p.presence_penalty;
  r.seed = seq.seed;
  FISSION_CHECK(ahead == 0 || (seq.matcher == nullptr && p.repetition_penalty == 1.0 && p.frequency_penalty == 0.0 &&
                                p.presence_penalty == 0.0),
                "rows ahead of a sequence with penalties or a constraint");
  const std::int32_t num_output = seq.num_output() + ahead;
  r.counter = static_cast<std::uint64_t>(num_output);
  r.want_logprob = p.logprobs;
  r.top_logprobs = p.logprobs ? p.top_logprobs : 0;
  ids->seen.clear();
  ids->output_ids.clear();
  ids->output_counts.clear();
  ids->masked.clear();
  if (p.repetition_penalty != 1.0) ids->seen.assign(seq.seen_tokens.begin(), seq.seen_tokens.end());
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    for (const auto& [t, count] : seq.output_counts) {
      ids->output_ids.push_back(t);
      ids->output_counts.push_back(count);
    }
  }
  if (num_output < p.min_new_tokens) {
    ids->masked = p.stop_token_ids;
    if (!p.ignore_eos)
      for (std::int32_t t : eos_token_ids_)
        if (t >= 0 && t < vocab_size) ids->masked.push_back(t);
  }
  r.seen_tokens = ids->seen;
  r.output_ids = ids->output_ids;
  r.output_counts = ids->output_counts;
  r.masked_ids = ids->masked;
  ids->allowed.clear();
  if (seq.matcher != nullptr) {
    const auto start = std::chrono::steady_clock::now();
    ids->allowed.assign(kernels::AllowedWords(vocab_size), 0u);
    seq.matcher->FillNextTokenMask(ids->allowed);
    if (seq.matcher->IsComplete()) {
      // The output may end: the tokens that end it are allowed (min_new_tokens still masks them).
      for (std::int32_t t : p.stop_token_ids)
        if (t >= 0 && t < vocab_size) ids->allowed[t >> 5] |= 1u << (t & 31);
      if (!p.ignore_eos)
        for (std::int32_t t : eos_token_ids_)
          if (t >= 0 && t < vocab_size) ids->allowed[t >> 5] |= 1u << (t & 31);
    }
    r.allowed_tokens = ids->allowed;
    mask_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++masks_;
  }
  return r;
}

TokenLogprob Sampler::ToTokenLogprob(const kernels::SampledToken& s) {
  TokenLogprob out;
  out.token_id = s.token;
  out.logprob = s.logprob;
  for (std::size_t i = 0; i < s.top_ids.size(); ++i) out.top.push_back({s.top_ids[i], s.top_logprobs[i]});
  return out;
}

std::int32_t Sampler::Sample(const float* logits, std::int64_t vocab_size, const Sequence& seq, TokenLogprob* logprob) {
  RowIds ids;
  kernels::SamplingRow row = MakeRow(seq, 0, vocab_size, &ids);
  row.want_logprob = logprob != nullptr;
  row.top_logprobs = logprob != nullptr ? seq.params->top_logprobs : 0;
  const kernels::SampledToken s = kernels::SampleOnHost(logits, vocab_size, row, scratch_);
  if (logprob != nullptr) *logprob = ToTokenLogprob(s);
  return s.token;
}

TokenLogprob Sampler::Logprob(const float* logits, std::int64_t vocab_size, std::int32_t token, std::int32_t top) {
  FISSION_CHECK(token >= 0 && token < vocab_size);
  kernels::SamplingRow row;
  row.temperature = 0.0;  // raw logits
  row.forced_token = token;
  row.want_logprob = true;
  row.top_logprobs = top;
  return ToTokenLogprob(kernels::SampleOnHost(logits, vocab_size, row, scratch_));
}

void Sampler::SampleStep(const StepPlan& plan, const std::vector<LogitsRows>& rows, const model::StepLogits& logits,
                         std::vector<ItemSamples>* where, std::vector<kernels::SampledToken>* results) {
  const Tensor& t = logits.logits;
  const std::int64_t vocab = t.dim(1);
  step_ids_.clear();
  step_rows_.clear();
  where->assign(plan.items.size(), ItemSamples{});
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    const ScheduledSequence& item = plan.items[k];
    const Sequence& seq = *item.seq;
    const SamplingParams& p = *seq.params;
    (*where)[k].prompt_logprobs_begin = static_cast<std::int32_t>(step_rows_.size());
    for (std::int32_t pos = item.prompt_logprob_begin; pos < item.prompt_logprob_end; ++pos) {
      kernels::SamplingRow r;
      r.row = rows[k].prompt_logprobs_begin + (pos - item.prompt_logprob_begin);
      r.temperature = 0.0;  // prompt logprobs use the raw logits
      r.forced_token = seq.tokens[pos + 1];
      r.want_logprob = true;
      r.top_logprobs = p.top_logprobs;
      step_rows_.push_back(r);
    }
    if (item.sample && item.num_drafts == 0 && seq.num_output() < p.max_new_tokens) {
      (*where)[k].sample = static_cast<std::int32_t>(step_rows_.size());
      step_rows_.push_back(MakeRow(seq, rows[k].sample, vocab, &step_ids_.emplace_back()));
    }
  }
  SampleRows(logits, step_rows_, results);
}

void Sampler::SampleRows(const model::StepLogits& logits, std::span<const kernels::SamplingRow> rows,
                         std::vector<kernels::SampledToken>* results) {
  results->assign(rows.size(), kernels::SampledToken{});
  if (rows.empty()) return;
  if (logits.backend != nullptr) {
    logits.backend->Sample(logits.logits, rows, *results);
    return;
  }
  const std::int64_t vocab = logits.logits.dim(1);
  const float* data = logits.logits.ptr<float>();
  for (std::size_t i = 0; i < rows.size(); ++i)
    (*results)[i] = kernels::SampleOnHost(data + rows[i].row * vocab, vocab, rows[i], scratch_);
}

}  // namespace fission::engine
