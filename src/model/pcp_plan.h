// Prefill context parallelism: how one step's tokens are split round-robin over the C ranks of a
// context-parallel group.
//
// Token i of the step's flattened stream belongs to CP rank i % C; every rank holds ceil(n / C)
// rows, padding at the tail (padding rows carry token 0 at position 0 and are dropped). A rank
// computes token-local work and attention queries for its own rows only; KV rows and hidden states
// are all-gathered over the group, where token i lands in row (i % C) · rows + i / C.
//
// Steps without prefill work (decode only), and steps with fewer than `min_tokens` tokens, run
// unsplit: every rank computes every token, as with C = 1.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/forward_batch.h"

namespace fission::model {

struct PcpPlan {
  int cp_size = 1;  // the split in effect for this step (1: unsplit)
  int cp_rank = 0;
  std::int32_t num_tokens = 0;          // real tokens in the step
  std::int32_t rows = 0;                // rows per rank, padding included
  std::vector<std::int32_t> owned;      // batch token index of each of this rank's real rows
  std::vector<std::int32_t> token_ids;  // [rows]
  std::vector<std::int32_t> positions;  // [rows]
  std::vector<kernels::SeqAttention> seqs;  // this rank's queries, by sequence (local rows)
  std::vector<std::int32_t> gathered_row;   // [num_tokens]: token i's row after an all-gather

  bool split() const { return cp_size > 1; }

 private:
  friend PcpPlan PlanContextParallelStep(const ForwardBatch&, int, int, int);
  std::vector<std::int32_t> query_positions_;  // storage behind seqs[*].query_positions
};

// The plan of CP rank `cp_rank` of `cp_size` for `batch`. The batch must outlive the plan.
PcpPlan PlanContextParallelStep(const ForwardBatch& batch, int cp_size, int cp_rank, int min_tokens);

// Default `min_tokens`: below it, two all-gathers per layer cost more than the attention they save.
inline constexpr int kDefaultPcpMinTokens = 512;

}  // namespace fission::model
