#include "engine/verifier.h"

#include "base/error.h"
#include "engine/speculative_acceptance.h"

namespace fission::engine {
namespace {

bool Greedy(const ScheduledSequence& item) { return item.seq->params->temperature == 0.0; }

}  // namespace

void SpeculativeVerifier::Verify(const StepPlan& plan, const std::vector<LogitsRows>& rows,
                                 const model::StepLogits& logits, Sampler& sampler, std::vector<VerifiedRun>* out) {
  out->assign(plan.items.size(), VerifiedRun{});
  VerifyGreedy(plan, rows, logits, sampler, out);
  if (accept_all_) return;  // every run took the rows' path
  // Sampled runs read their target distributions on the host.
  Buffer host;
  const float* data = nullptr;
  const std::int64_t vocab = logits.logits.dim(1);
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    const ScheduledSequence& item = plan.items[k];
    if (item.num_drafts == 0 || Greedy(item)) continue;
    if (data == nullptr) {
      if (logits.backend != nullptr) {
        host = model::HostLogits(model::StepLogits(logits.logits, logits.backend));
        data = host.ptr<float>();
      } else {
        data = logits.logits.ptr<float>();
      }
    }
    VerifySampled(item, rows[k], data, vocab, sampler, &(*out)[k]);
  }
}

void SpeculativeVerifier::VerifyGreedy(const StepPlan& plan, const std::vector<LogitsRows>& rows,
                                       const model::StepLogits& logits, Sampler& sampler,
                                       std::vector<VerifiedRun>* out) {
  const std::int64_t vocab = logits.logits.dim(1);
  ids_.clear();
  rows_.clear();
  std::vector<std::int32_t> first(plan.items.size(), -1);  // each greedy run's first row in rows_
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    const ScheduledSequence& item = plan.items[k];
    if (item.num_drafts == 0 || (!accept_all_ && !Greedy(item))) continue;
    first[k] = static_cast<std::int32_t>(rows_.size());
    for (std::int32_t j = 0; j <= item.num_drafts; ++j) {
      rows_.push_back(sampler.MakeRow(*item.seq, rows[k].sample + j, vocab, &ids_.emplace_back(), j));
      if (accept_all_ && j < item.num_drafts) rows_.back().forced_token = item.seq->drafts[j];
    }
  }
  if (rows_.empty()) return;
  sampler.SampleRows(logits, rows_, &results_);
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    if (first[k] < 0) continue;
    const ScheduledSequence& item = plan.items[k];
    std::vector<std::int32_t> targets;
    for (std::int32_t j = 0; j <= item.num_drafts; ++j) targets.push_back(results_[first[k] + j].token);
    const std::span<const std::int32_t> drafts(item.seq->drafts.data(), static_cast<std::size_t>(item.num_drafts));
    VerifiedRun& run = (*out)[k];
    run.accepted = accept_all_ ? item.num_drafts : AcceptGreedy(targets, drafts);
    run.tokens.assign(results_.begin() + first[k], results_.begin() + first[k] + run.accepted + 1);
  }
}

void SpeculativeVerifier::VerifySampled(const ScheduledSequence& item, const LogitsRows& rows,
                                        const float* host_logits, std::int64_t vocab, Sampler& sampler,
                                        VerifiedRun* out) {
  const Sequence& seq = *item.seq;
  std::vector<kernels::SamplingRow> row(item.num_drafts + 1);
  std::deque<Sampler::RowIds> ids;
  std::vector<kernels::SamplingDistribution> dists;
  for (std::int32_t j = 0; j <= item.num_drafts; ++j) {
    row[j] = sampler.MakeRow(seq, rows.sample + j, vocab, &ids.emplace_back(), j);
    dists.push_back(kernels::DistributionOnHost(host_logits + row[j].row * vocab, vocab, row[j], sampler.host_scratch()));
  }
  const std::span<const std::int32_t> drafts(seq.drafts.data(), static_cast<std::size_t>(item.num_drafts));
  const std::vector<std::int32_t> emitted =
      AcceptSampled(dists, drafts, seq.seed, static_cast<std::uint64_t>(seq.num_output()));
  out->accepted = static_cast<std::int32_t>(emitted.size()) - 1;
  for (std::size_t j = 0; j < emitted.size(); ++j) {
    kernels::SampledToken token;
    token.token = emitted[j];
    if (row[j].want_logprob) {
      // The logprob of the emitted token under the row's distribution, as plain sampling reports it.
      kernels::SamplingRow forced = row[j];
      forced.forced_token = emitted[j];
      token = kernels::SampleOnHost(host_logits + forced.row * vocab, vocab, forced, sampler.host_scratch());
    }
    out->tokens.push_back(std::move(token));
  }
}

}  // namespace fission::engine
