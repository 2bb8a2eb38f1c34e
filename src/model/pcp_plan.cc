#include "model/pcp_plan.h"

#include <algorithm>

#include "base/error.h"

namespace fission::model {

PcpPlan PlanContextParallelStep(const ForwardBatch& batch, int cp_size, int cp_rank, int min_tokens) {
  FISSION_CHECK(cp_size >= 1 && cp_rank >= 0 && cp_rank < cp_size);
  PcpPlan plan;
  plan.num_tokens = batch.num_tokens();
  const bool has_prefill = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                                       [](const SequenceSlice& s) { return s.query_len > 1; });
  const bool split = cp_size > 1 && has_prefill && plan.num_tokens >= min_tokens;
  const int c = split ? cp_size : 1;
  plan.cp_size = c;
  plan.cp_rank = split ? cp_rank : 0;
  plan.rows = (plan.num_tokens + c - 1) / c;
  for (std::int32_t i = plan.cp_rank; i < plan.num_tokens; i += c) plan.owned.push_back(i);
  plan.token_ids.assign(plan.rows, 0);
  plan.positions.assign(plan.rows, 0);
  for (std::size_t k = 0; k < plan.owned.size(); ++k) {
    plan.token_ids[k] = batch.token_ids[plan.owned[k]];
    plan.positions[k] = batch.positions[plan.owned[k]];
  }
  plan.gathered_row.resize(plan.num_tokens);
  for (std::int32_t i = 0; i < plan.num_tokens; ++i) plan.gathered_row[i] = (i % c) * plan.rows + i / c;

  // Queries by sequence: the owned tokens of a sequence are consecutive local rows.
  plan.query_positions_.reserve(plan.owned.size());
  struct Span {
    std::int32_t start, len, first_row;
  };
  std::vector<Span> spans;
  for (const SequenceSlice& s : batch.sequences) {
    const std::int32_t first = s.query_start + ((plan.cp_rank - s.query_start % c) % c + c) % c;
    Span span{static_cast<std::int32_t>(plan.query_positions_.size()), 0, first / c};
    for (std::int32_t i = first; i < s.query_start + s.query_len; i += c) {
      plan.query_positions_.push_back(batch.positions[i]);
      ++span.len;
    }
    spans.push_back(span);
  }
  for (std::size_t k = 0; k < batch.sequences.size(); ++k) {
    const SequenceSlice& s = batch.sequences[k];
    if (spans[k].len == 0) continue;
    kernels::SeqAttention a;
    a.query_start = spans[k].first_row;  // owned token i is local row i / C
    a.query_len = spans[k].len;
    a.kv_len = s.kv_len();
    a.query_positions = {plan.query_positions_.data() + spans[k].start, static_cast<std::size_t>(spans[k].len)};
    a.block_table = s.block_table;
    plan.seqs.push_back(a);
  }
  return plan;
}

}  // namespace fission::model
