#include "model/token_layout.h"

#include <algorithm>

#include "base/error.h"
#include "model/step_inputs.h"

namespace fission::model {

DpGroupShape DataParallelShape(const ForwardBatch& batch) {
  DpGroupShape shape;
  shape.num_tokens = batch.num_tokens();
  shape.prefill = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                              [](const SequenceSlice& s) { return s.query_len > 1 && !s.verify; });
  return shape;
}

ForwardBatch EmptyDataParallelStep() {
  ForwardBatch b;
  b.token_ids = {0};
  b.positions = {0};
  b.kv_slots = {-1};
  b.sequences = {{0, 1, 0, {0}}};
  b.logits_indices = {0};
  return b;
}

namespace {

bool SplitsStep(const DpGroupShape& shape, int cp_size, int min_tokens) {
  return cp_size > 1 && shape.prefill && shape.num_tokens >= min_tokens;
}

// A DP group's rows at the feed-forward: its tokens after its CP gather (padding included).
std::int32_t FeedForwardRows(const DpGroupShape& shape, int cp_size, int min_tokens) {
  if (shape.num_tokens == 0) return 1;  // the empty step's one token
  if (!SplitsStep(shape, cp_size, min_tokens)) return shape.num_tokens;
  return (shape.num_tokens + cp_size - 1) / cp_size * cp_size;
}

}  // namespace

void ExpertLoadCount::Add(int ep_rank, std::int64_t pairs, int ep_size) {
  if (per_ep_rank.empty()) per_ep_rank.assign(ep_size, 0);
  per_ep_rank[ep_rank] += pairs;
}

PcpPlan PlanContextParallelStep(const ForwardBatch& batch, int cp_size, int cp_rank, int min_tokens) {
  FISSION_CHECK(cp_size >= 1 && cp_rank >= 0 && cp_rank < cp_size);
  PcpPlan plan;
  plan.num_tokens = batch.num_tokens();
  const bool split = SplitsStep(DataParallelShape(batch), cp_size, min_tokens);
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
  // Owned token i is local row i / C, so a sequence's owned tokens are consecutive rows.
  for (std::size_t k = 0; k < batch.sequences.size(); ++k) {
    const SequenceSlice& s = batch.sequences[k];
    const std::int32_t first = s.query_start + ((plan.cp_rank - s.query_start % c) % c + c) % c;
    const std::int32_t end = s.query_start + s.query_len;
    if (first >= end) continue;
    plan.queries.push_back({static_cast<std::int32_t>(k), first / c, (end - first + c - 1) / c});
  }
  plan.real_rows = static_cast<std::int32_t>(plan.owned.size());
  plan.step_tokens = plan.num_tokens;
  if (!batch.dp_groups.empty()) {
    FISSION_CHECK(batch.dp_rank >= 0 && batch.dp_rank < static_cast<std::int32_t>(batch.dp_groups.size()));
    const DpGroupShape& own = batch.dp_groups[batch.dp_rank];
    FISSION_CHECK(own.num_tokens == 0 ? plan.num_tokens == 1 : own == DataParallelShape(batch),
                  "DP group ", batch.dp_rank, "'s shape does not match its batch");
    if (own.num_tokens == 0) plan.real_rows = 0;
    plan.dp_rank = batch.dp_rank;
    plan.step_tokens = 0;
    for (const DpGroupShape& g : batch.dp_groups) {
      plan.dp_rows.push_back(FeedForwardRows(g, cp_size, min_tokens));
      plan.step_tokens += g.num_tokens;
    }
  }
  return plan;
}

TokenLayout::TokenLayout(kernels::Backend& backend, const RankInfo& rank, const StepView& step, ExpertLoadCount* load)
    : b_(backend), rank_(rank), step_(step), load_(load) {}

std::int64_t TokenLayout::rows() const { return step_.rows; }

Tensor TokenLayout::KvRowsOfAllTokens(const Tensor& rows, Buffer* scratch) const {
  if (!step_.split()) return rows;
  const std::int64_t width = rows.numel() / rows.shape[0];
  Buffer gathered(rows.dtype, Shape{step_.cp_size * rows.shape[0], width}, b_.allocator());
  rank_.groups->cp->AllGather(rows, gathered);
  *scratch = Buffer(rows.dtype, Shape{step_.num_tokens, width}, b_.allocator());
  b_.GatherRows(gathered, step_.gathered_rows, *scratch);
  return scratch->tensor();
}

void TokenLayout::FeedForward(const Tensor& x, const Tensor& out, const FeedForwardShard& shard) const {
  const std::int64_t rows = x.shape[0], hidden = x.shape[1];
  Buffer gathered, partial;
  Tensor in = x, result = out;
  if (step_.split()) {
    gathered = Buffer(DType::kF32, Shape{step_.cp_size * rows, hidden}, b_.allocator());
    rank_.groups->cp->AllGather(x, gathered);
    partial = Buffer(DType::kF32, gathered.tensor().shape, b_.allocator());
    in = gathered;
    result = partial;
  }
  if (step_.dp_rows.empty()) {
    shard(in, result);
    // Each rank computed its slice of the units for every row: sum the world's slices.
    if (rank_.world_size() > 1) rank_.groups->world->AllReduceSum(result);
  } else {
    MeetDataParallel(in, result, shard);
  }
  if (step_.split()) b_.GatherRows(result, step_.own_rows, out);
}

void TokenLayout::MeetDataParallel(const Tensor& in, const Tensor& result, const FeedForwardShard& shard) const {
  const std::int64_t rows = in.shape[0], hidden = in.shape[1];
  const int groups = static_cast<int>(step_.dp_rows.size());
  FISSION_CHECK(rows == step_.dp_rows[step_.dp_rank], "DP group ", step_.dp_rank, " brings ", rows,
                " rows to the feed-forward where ", step_.dp_rows[step_.dp_rank], " were planned");
  const std::int64_t widest = *std::max_element(step_.dp_rows.begin(), step_.dp_rows.end());
  // Pad this group's rows to the widest group's (an all-gather moves equal chunks).
  Buffer padded(DType::kF32, Shape{widest, hidden}, b_.allocator());
  if (rows < widest) b_.Zero(padded);
  std::vector<std::int32_t> identity(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) identity[i] = static_cast<std::int32_t>(i);
  b_.GatherRows(in, identity, padded.tensor().Rows(0, rows));
  Buffer all(DType::kF32, Shape{groups * widest, hidden}, b_.allocator());
  rank_.groups->dp->AllGather(padded, all);
  Buffer partial(DType::kF32, all.tensor().shape, b_.allocator());
  shard(all, partial);
  rank_.groups->world->AllReduceSum(partial);
  for (std::int64_t i = 0; i < rows; ++i) identity[i] = static_cast<std::int32_t>(step_.dp_rank * widest + i);
  b_.GatherRows(partial, identity, result);
}

void TokenLayout::CountTensorParallelExpertLoad(int top_k) const {
  if (load_ != nullptr) load_->Add(0, step_.step_tokens * top_k, rank_.ep_size());
}

namespace {

// An int32 tensor as fp32 of the same bits: all-gathers and row gathers only move its words.
Tensor SameBitsAsF32(const Tensor& t) {
  FISSION_CHECK(t.dtype == DType::kI32, "expected int32, got ", DTypeName(t.dtype));
  Tensor view = t;
  view.dtype = DType::kF32;
  return view;
}

}  // namespace

void TokenLayout::GatherIndexerSelection(const Tensor& own, const Tensor& out) const {
  const int ranks = rank_.attn_tp_size();
  FISSION_CHECK(step_.splits_indexer() && ranks > 1, "the indexer's queries are not split in this step");
  const std::int64_t compact = own.shape[0], k = own.shape[1];
  Buffer gathered(DType::kI32, Shape{ranks * compact, k}, b_.allocator());
  rank_.groups->attn_tp->AllGather(SameBitsAsF32(own), SameBitsAsF32(gathered));
  b_.GatherRows(SameBitsAsF32(gathered), step_.indexer_order, SameBitsAsF32(out));
}

void TokenLayout::ReduceAttentionOutput(const Tensor& out) const {
  if (rank_.attn_tp_size() > 1) rank_.groups->attn_tp->AllReduceSum(out);
}

void TokenLayout::ReduceEmbedding(const Tensor& h) const {
  if (rank_.attn_tp_size() > 1) rank_.groups->attn_tp->AllReduceSum(h);
}

Buffer TokenLayout::LogitRows(const Tensor& h) const {
  const std::int64_t m = static_cast<std::int64_t>(step_.logit_rows.size()), hidden = h.shape[1];
  Buffer selected(DType::kF32, Shape{m, hidden}, b_.allocator());
  if (!step_.split()) {
    b_.GatherRows(h, step_.logit_rows, selected);
    return selected;
  }
  Buffer all(DType::kF32, Shape{step_.cp_size * step_.rows, hidden}, b_.allocator());
  rank_.groups->cp->AllGather(h, all);
  b_.GatherRows(all, step_.logit_rows, selected);
  return selected;
}

Buffer TokenLayout::AllRows(Buffer h) const {
  if (!step_.split()) return h;
  const std::int64_t hidden = h.tensor().shape[1];
  Buffer all(DType::kF32, Shape{step_.cp_size * step_.rows, hidden}, b_.allocator());
  rank_.groups->cp->AllGather(h, all);
  Buffer ordered(DType::kF32, Shape{step_.num_tokens, hidden}, b_.allocator());
  b_.GatherRows(all, step_.gathered_rows, ordered);
  return ordered;
}

Tensor TokenLayout::VocabSlice(const Tensor& out, Buffer* scratch) const {
  const int ranks = rank_.attn_tp_size();
  if (ranks == 1) return out;
  *scratch = Buffer(DType::kF32, Shape{out.shape[0], out.shape[1] / ranks}, b_.allocator());
  return scratch->tensor();
}

void TokenLayout::GatherVocab(const Tensor& local, const Tensor& out) const {
  const int ranks = rank_.attn_tp_size();
  if (ranks == 1) {
    FISSION_CHECK(local.data == out.data, "a single vocabulary rank computes the logits in place");
    return;
  }
  const std::int64_t m = local.shape[0], part = local.shape[1];
  Buffer gathered(DType::kF32, Shape{ranks, m, part}, b_.allocator());
  rank_.groups->attn_tp->AllGather(local, gathered);
  // [rank, row, part] -> [row, rank · part]: gather the rows of the [rank · m, part] view.
  FISSION_CHECK(static_cast<std::int64_t>(step_.vocab_order.size()) == ranks * m, "vocab gather order of ",
                step_.vocab_order.size(), " rows for ", ranks, " ranks of ", m);
  b_.GatherRows(gathered.tensor().View(Shape{ranks * m, part}), step_.vocab_order, out.View(Shape{m * ranks, part}));
}

}  // namespace fission::model
