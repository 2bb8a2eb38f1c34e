// The token layout of a step: which rows of the step's token stream this rank computes, and the
// parallel transitions between layouts, shared by every model family. Model files call the named
// transitions below and contain no collective calls and no tests of the split, so every family
// gets tensor and prefill context parallelism without writing them again.
//
// Prefill context parallelism (round-robin split): token i of the step's flattened stream belongs
// to CP rank i % C; every rank holds ceil(n / C) rows, padding at the tail (padding rows carry
// token 0 at position 0 and are dropped). A rank computes token-local work and attention queries
// for its own rows only; KV rows and hidden states are all-gathered over the CP group, where token
// i lands in row (i % C) · rows + i / C. Steps without prefill work (decode only), and steps with
// fewer than `min_tokens` tokens, run unsplit: every rank computes every token, as with C = 1.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"

namespace fission::model {

// This rank's place in the parallel layout; a single rank has sizes of 1 and no communicators.
struct RankInfo {
  const comm::ProcessGroups* groups = nullptr;
  int world_rank() const { return groups ? groups->world_rank : 0; }
  int world_size() const { return groups ? groups->world_size : 1; }
  int attn_tp_rank() const { return groups ? groups->attn_tp_rank : 0; }
  int attn_tp_size() const { return groups ? groups->attn_tp_size : 1; }
  int cp_rank() const { return groups ? groups->cp_rank : 0; }
  int cp_size() const { return groups ? groups->cp_size : 1; }
  int dp_rank() const { return groups ? groups->dp_rank : 0; }
  int dp_size() const { return groups ? groups->dp_size : 1; }
  int ep_rank() const { return groups ? groups->ep_rank : 0; }
  int ep_size() const { return groups ? groups->ep_size : 1; }
  int moe_tp_rank() const { return groups ? groups->world_rank % groups->moe_tp_size() : 0; }
  int moe_tp_size() const { return groups ? groups->moe_tp_size() : 1; }
};

// The shape of `batch` as DpGroupShape describes it.
DpGroupShape DataParallelShape(const ForwardBatch& batch);
// What a DP group with no work runs so that its ranks still meet the others in every collective:
// one token 0 at position 0 that writes nothing (KV slot -1) and whose logits are dropped.
ForwardBatch EmptyDataParallelStep();

// The split of one step for one CP rank, on the host (the step-input block carries it to the
// device, model/step_inputs.h).
struct PcpPlan {
  int cp_size = 1;  // the split in effect for this step (1: unsplit)
  int cp_rank = 0;
  std::int32_t num_tokens = 0;          // real tokens in the step
  std::int32_t rows = 0;                // rows per rank, padding included
  std::vector<std::int32_t> owned;      // batch token index of each of this rank's real rows
  std::vector<std::int32_t> token_ids;  // [rows]
  std::vector<std::int32_t> positions;  // [rows]
  // This rank's queries of one batch sequence: local rows [first_row, first_row + len).
  struct Queries {
    std::int32_t sequence = 0;
    std::int32_t first_row = 0;
    std::int32_t len = 0;
  };
  std::vector<Queries> queries;  // sequences with at least one owned query, in batch order
  std::vector<std::int32_t> gathered_row;  // [num_tokens]: token i's row after an all-gather
  // Rows of this rank that are tokens of the step: not CP padding, not a DP group's empty step.
  std::int32_t real_rows = 0;
  // Data-parallel attention: every DP group's rows at the feed-forward (its tokens after its CP
  // gather; 1 for an empty step), in DP order, and this rank's group. Empty with one group.
  std::vector<std::int32_t> dp_rows;
  int dp_rank = 0;
  // Tokens of the step over every DP group (the expert load of tensor-parallel experts).
  std::int64_t step_tokens = 0;

  bool split() const { return cp_size > 1; }
};

// The plan of CP rank `cp_rank` of `cp_size` for `batch`.
PcpPlan PlanContextParallelStep(const ForwardBatch& batch, int cp_size, int cp_rank, int min_tokens);

// Expert load: the (token, routed expert) pairs each EP rank's experts have computed, summed over
// the MoE layers and steps since load (a rank's model keeps one; every rank of the world counts
// the whole world's load).
struct ExpertLoadCount {
  std::vector<std::int64_t> per_ep_rank;
  void Add(int ep_rank, std::int64_t pairs, int ep_size);
};

// Default `min_tokens`: below it, two all-gathers per layer cost more than the attention they save.
inline constexpr int kDefaultPcpMinTokens = 512;

struct StepView;

// The transitions of one step (cheap to make: a view of the rank and the step's inputs).
class TokenLayout {
 public:
  TokenLayout(kernels::Backend& backend, const RankInfo& rank, const StepView& step, ExpertLoadCount* load = nullptr);

  // This rank's rows of the step (its own tokens when split, every token otherwise).
  std::int64_t rows() const;
  // Rows [rows, width] of this rank's tokens -> the rows of every token of the step in token order
  // (all-gathered over the CP group when split; `rows` itself otherwise): what every rank writes
  // into its full KV cache.
  Tensor KvRowsOfAllTokens(const Tensor& rows, Buffer* scratch) const;
  // Runs a feed-forward whose weights are sharded over the whole world on this rank's rows x
  // [rows, hidden] into out [rows, hidden]: the CP group's rows are gathered first when the step is
  // split, `shard(in, partial)` computes this rank's partial sums for `in`, the world's partial
  // sums are added, and each rank keeps its own rows.
  // With data-parallel attention the rows of every DP group meet there: the groups' rows are
  // all-gathered (each padded to the largest group's), the shard runs over all of them, and each
  // rank keeps its group's.
  using FeedForwardShard = std::function<void(const Tensor& in, const Tensor& partial)>;
  void FeedForward(const Tensor& x, const Tensor& out, const FeedForwardShard& shard) const;
  // Expert parallelism (--ep-size): a MoE whose routed experts are split over the EP ranks. Each
  // rank routes a distinct share of the step's tokens (its rows, split over the ranks that hold
  // the same rows), sends each (token, expert) pair to the ranks holding the expert (all-to-all),
  // which run it and send the weighted results back; the shared experts are replicated and run
  // where the token is. `out` gets every row of this rank's `x` (zero for padding rows).
  struct ExpertParallelMoe {
    int num_experts = 0;
    int top_k = 0;
    // ids [s, top_k] (I32) and weights [s, top_k] of the rows x [s, hidden].
    std::function<void(const Tensor& x, const Tensor& ids, const Tensor& weights)> route;
    // out [r, hidden] = weights[i] · expert ids[i] (this rank's local expert index) of x[i].
    std::function<void(const Tensor& x, const Tensor& ids, const Tensor& weights, const Tensor& out)> experts;
    // out [s, hidden] += the shared experts of x (null: none).
    std::function<void(const Tensor& x, const Tensor& out)> add_shared;
  };
  void ExpertParallel(const Tensor& x, const Tensor& out, const ExpertParallelMoe& moe) const;
  // A tensor-parallel MoE (every rank holds every expert's slice) counts its load: the step's
  // tokens times top_k, all on EP rank 0.
  void CountTensorParallelExpertLoad(int top_k) const;
  // The indexer's query split (StepView::splits_indexer): this rank's selections `own`
  // [compact rows, k] (I32) -> every rank's selections of all its rows, `out` [rows, k], gathered
  // over the attention-TP group and put back in row order.
  void GatherIndexerSelection(const Tensor& own, const Tensor& out) const;
  // Sums the attention-TP group's partial attention outputs (heads are split over it).
  void ReduceAttentionOutput(const Tensor& out) const;
  // Sums the vocab-parallel embedding's rows (each rank holds a slice of the vocabulary).
  void ReduceEmbedding(const Tensor& h) const;
  // The hidden states of the rows whose logits the step returns, in the batch's order (gathered
  // over the CP group when split).
  Buffer LogitRows(const Tensor& h) const;
  // This rank's rows `h` -> the rows of every token of the step, in token order (gathered over
  // the CP group when split; `h` itself otherwise).
  Buffer AllRows(Buffer h) const;
  // Where a vocab-parallel projection writes this rank's slice of `out` [m, vocab]: `out` itself
  // with one vocabulary rank, else `scratch` [m, vocab / A].
  Tensor VocabSlice(const Tensor& out, Buffer* scratch) const;
  // The local logits [m, vocab / A] (from VocabSlice) -> every rank's full logits `out` [m, vocab]
  // (gathered over the attention-TP group and put in vocabulary order; nothing to do for one rank).
  void GatherVocab(const Tensor& local, const Tensor& out) const;
  int vocab_ranks() const { return rank_.attn_tp_size(); }

 private:
  // The DP meeting of FeedForward: group rows `in` [G, hidden] -> every group's rows (padded),
  // the shard, the world's sum, this group's rows of it in `result` [G, hidden].
  void MeetDataParallel(const Tensor& in, const Tensor& result, const FeedForwardShard& shard) const;

  kernels::Backend& b_;
  const RankInfo& rank_;
  const StepView& step_;
  ExpertLoadCount* load_;
};

}  // namespace fission::model
