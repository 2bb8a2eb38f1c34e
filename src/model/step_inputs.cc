#include "model/step_inputs.h"

#include <algorithm>

#include "base/error.h"

namespace fission::model {
namespace {

std::size_t AlignUp(std::size_t n) { return (n + 255) / 256 * 256; }

}  // namespace

StepInputs::StepInputs(kernels::Backend& backend, MemorySpec spec, int vocab_ranks, std::size_t fixed_bytes,
                       const FamilyInputs* family)
    : backend_(backend), spec_(std::move(spec)), vocab_ranks_(vocab_ranks), fixed_(fixed_bytes > 0), family_(family) {
  for (std::size_t c = 0; c < spec_.classes.size(); ++c)
    if (spec_.classes[c].kind == CacheKind::kPaged && spec_.classes[c].tokens_per_entry > 1)
      multi_token_classes_.push_back(static_cast<int>(c));
  if (fixed_) block_ = backend_.MakeInputBlock(fixed_bytes);
}

void StepInputs::SplitIndexerQueries(int ranks, int rank) {
  FISSION_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "indexer split rank ", rank, " of ", ranks);
  indexer_ranks_ = ranks;
  indexer_rank_ = rank;
}

StepInputs::Layout StepInputs::MakeLayout(std::int64_t rows, std::int64_t tokens, std::int64_t logits,
                                          std::int64_t sequences, std::int64_t table_width,
                                          std::int64_t indexer_rows) const {
  const auto r = static_cast<std::size_t>(rows), t = static_cast<std::size_t>(tokens),
             m = static_cast<std::size_t>(logits), s = static_cast<std::size_t>(sequences);
  Layout l;
  l.token_ids = 0;
  l.all_token_ids = AlignUp(l.token_ids + r * 4);
  l.positions = AlignUp(l.all_token_ids + t * 4);
  l.kv_slots = AlignUp(l.positions + r * 4);
  l.entry_slots = AlignUp(l.kv_slots + t * 8);
  l.logits = AlignUp(l.entry_slots + multi_token_classes_.size() * t * 8);
  l.state_slots = AlignUp(l.logits + m * 4);
  l.gathered = AlignUp(l.state_slots + s * 4);
  l.own = AlignUp(l.gathered + t * 4);
  l.logit_rows = AlignUp(l.own + r * 4);
  l.vocab_order = AlignUp(l.logit_rows + m * 4);
  const auto ir = static_cast<std::size_t>(indexer_rows);
  l.indexer_rows = AlignUp(l.vocab_order + static_cast<std::size_t>(vocab_ranks_) * m * 4);
  l.indexer_positions = AlignUp(l.indexer_rows + ir * 4);
  l.indexer_order = AlignUp(l.indexer_positions + ir * 4);
  l.family = AlignUp(l.indexer_order + (ir > 0 ? r : 0) * 4);
  l.tables = AlignUp(l.family + (family_ != nullptr ? family_->Bytes(rows, tokens, sequences) : 0));
  l.bytes = l.tables + s * static_cast<std::size_t>(table_width) * 4;
  return l;
}

std::size_t StepInputs::BytesFor(std::int64_t rows, std::int64_t tokens, std::int64_t logits,
                                 std::int64_t sequences, std::int64_t table_width) const {
  return MakeLayout(rows, tokens, logits, sequences, table_width).bytes;
}

const StepView& StepInputs::Write(const ForwardBatch& batch, const PcpPlan& plan, std::int64_t page_size,
                                  std::int32_t table_width) {
  const std::int64_t rows = plan.rows, tokens = plan.num_tokens;
  const std::int64_t m = static_cast<std::int64_t>(batch.logits_indices.size());
  const std::int64_t seqs = static_cast<std::int64_t>(batch.sequences.size());
  std::int32_t width = table_width;
  if (width == 0)
    for (const SequenceSlice& s : batch.sequences) width = std::max(width, static_cast<std::int32_t>(s.block_table.size()));
  width = std::max(width, 1);
  // The indexer's queries are split only in steps with prefill work: decode-only steps (the ones
  // graphs capture) stay replicated.
  const bool prefill = std::any_of(batch.sequences.begin(), batch.sequences.end(),
                                   [](const SequenceSlice& q) { return q.query_len > 1 && !q.verify; });
  const std::int64_t indexer_rows =
      indexer_ranks_ > 1 && prefill ? (rows + indexer_ranks_ - 1) / indexer_ranks_ : 0;
  const Layout l = MakeLayout(rows, tokens, m, seqs, width, indexer_rows);
  const std::size_t capacity = block_ ? block_->host().size() : 0;
  if (l.bytes > capacity) {
    FISSION_CHECK(!fixed_, "a step of ", seqs, " sequences and ", tokens, " tokens needs ", l.bytes,
                  " bytes of step inputs; the fixed block has ", capacity);
    block_.reset();  // waits for its last copy
    block_ = backend_.MakeInputBlock(std::max(l.bytes, 2 * capacity));
  }
  host_ = block_->host();
  layout_ = l;
  const std::size_t r = static_cast<std::size_t>(rows), t = static_cast<std::size_t>(tokens),
                    mm = static_cast<std::size_t>(m), s = static_cast<std::size_t>(seqs),
                    w = static_cast<std::size_t>(width);

  const auto ids = At<std::int32_t>(l.token_ids, r), positions = At<std::int32_t>(l.positions, r);
  std::copy(plan.token_ids.begin(), plan.token_ids.end(), ids.begin());
  const auto all_ids = At<std::int32_t>(l.all_token_ids, t);
  std::copy(batch.token_ids.begin(), batch.token_ids.end(), all_ids.begin());
  std::copy(plan.positions.begin(), plan.positions.end(), positions.begin());
  const auto kv_slots = At<std::int64_t>(l.kv_slots, t);
  std::copy(batch.kv_slots.begin(), batch.kv_slots.end(), kv_slots.begin());
  const auto logits = At<std::int32_t>(l.logits, mm);
  std::copy(batch.logits_indices.begin(), batch.logits_indices.end(), logits.begin());
  const auto states = At<std::int32_t>(l.state_slots, s);
  const auto tables = At<std::int32_t>(l.tables, s * w);
  std::fill(tables.begin(), tables.end(), 0);
  for (std::size_t k = 0; k < s; ++k) {
    const SequenceSlice& seq = batch.sequences[k];
    states[k] = seq.state_slot;
    std::copy(seq.block_table.begin(), seq.block_table.end(), tables.begin() + k * w);
  }
  // Entries covering several tokens: the slot of each new token's entry (-1 where the token writes
  // nothing: a graph's padding rows).
  view_.entry_slots.assign(spec_.classes.size(), {});
  for (std::size_t c = 0; c < spec_.classes.size(); ++c)
    if (spec_.classes[c].kind == CacheKind::kPaged) view_.entry_slots[c] = kv_slots;
  for (std::size_t j = 0; j < multi_token_classes_.size(); ++j) {
    const CacheClass& cls = spec_.classes[multi_token_classes_[j]];
    const auto slots = At<std::int64_t>(l.entry_slots + j * t * 8, t);
    for (const SequenceSlice& seq : batch.sequences)
      for (std::int32_t i = seq.query_start; i < seq.query_start + seq.query_len; ++i)
        slots[i] = kv_slots[i] < 0 ? -1 : PagedEntrySlot(cls, seq.block_table, page_size, batch.positions[i]);
    view_.entry_slots[multi_token_classes_[j]] = slots;
  }
  // The token layout's arrays.
  const auto gathered = At<std::int32_t>(l.gathered, t), own = At<std::int32_t>(l.own, r);
  std::copy(plan.gathered_row.begin(), plan.gathered_row.end(), gathered.begin());
  for (std::size_t i = 0; i < r; ++i) own[i] = static_cast<std::int32_t>(plan.cp_rank * rows + static_cast<std::int64_t>(i));
  const auto logit_rows = At<std::int32_t>(l.logit_rows, mm);
  for (std::size_t i = 0; i < mm; ++i) logit_rows[i] = plan.split() ? gathered[logits[i]] : logits[i];
  const std::size_t ranks = static_cast<std::size_t>(vocab_ranks_);
  const auto order = At<std::int32_t>(l.vocab_order, ranks * mm);
  // [rank, row, part] -> [row, rank · part]: row i of rank r's slice sits at r · m + i.
  for (std::size_t i = 0; i < mm; ++i)
    for (std::size_t k = 0; k < ranks; ++k) order[i * ranks + k] = static_cast<std::int32_t>(k * mm + i);

  // This rank's queries by sequence: owned tokens of a sequence are consecutive local rows.
  seqs_.clear();
  decode_seqs_.clear();
  prefill_seqs_.clear();
  for (const PcpPlan::Queries& q : plan.queries) {
    const SequenceSlice& seq = batch.sequences[q.sequence];
    kernels::SeqAttention a;
    a.query_start = q.first_row;
    a.query_len = q.len;
    a.kv_len = seq.kv_len();
    a.query_positions = positions.subspan(q.first_row, q.len);
    a.block_table = tables.subspan(static_cast<std::size_t>(q.sequence) * w, w);
    a.state_slot = seq.state_slot;
    a.token_start = seq.query_start;
    a.new_tokens = seq.query_len;
    // A verify run's rows are decode rows: each gets the logits a plain decode step would.
    a.decode = !plan.split() && (seq.query_len == 1 || seq.verify);
    seqs_.push_back(a);
    (a.decode ? decode_seqs_ : prefill_seqs_).push_back(a);
  }

  token_seqs_.clear();
  for (std::size_t k = 0; k < s; ++k) {
    const SequenceSlice& seq = batch.sequences[k];
    kernels::SeqAttention a;
    a.query_start = a.token_start = seq.query_start;
    a.query_len = a.new_tokens = seq.query_len;
    a.kv_len = seq.kv_len();
    a.block_table = tables.subspan(k * w, w);
    a.state_slot = seq.state_slot;
    token_seqs_.push_back(a);
  }

  WriteIndexerSplit(l, positions, indexer_rows);

  view_.token_ids = ids;
  view_.all_token_ids = all_ids;
  view_.token_seqs = token_seqs_;
  view_.positions = positions;
  view_.kv_slots = kv_slots;
  view_.logits_indices = logits;
  view_.state_slots = states;
  view_.block_tables = tables;
  view_.seqs = seqs_;
  view_.decode_seqs = decode_seqs_;
  view_.prefill_seqs = prefill_seqs_;
  view_.gathered_rows = gathered;
  view_.own_rows = own;
  view_.logit_rows = logit_rows;
  view_.vocab_order = order;
  view_.cp_size = plan.cp_size;
  view_.cp_rank = plan.cp_rank;
  view_.rows = plan.rows;
  view_.num_tokens = plan.num_tokens;
  view_.real_rows = plan.real_rows;
  view_.dp_rows = plan.dp_rows;
  view_.dp_rank = plan.dp_rank;
  view_.step_tokens = plan.step_tokens;
  view_.table_width = width;
  view_.page_size = page_size;
  view_.family = {};
  if (family_ != nullptr) {
    const std::span<std::byte> region = host_.subspan(l.family, l.tables - l.family);
    family_->Write(view_, region);
    view_.family = region;
  }
  return view_;
}

void StepInputs::WriteIndexerSplit(const Layout& l, std::span<const std::int32_t> positions,
                                   std::int64_t compact_rows) {
  indexer_seqs_.clear();
  view_.indexer_rows = view_.indexer_positions = view_.indexer_order = {};
  view_.indexer_seqs = {};
  if (compact_rows == 0) return;
  const std::int32_t ranks = indexer_ranks_, rank = indexer_rank_;
  const auto rows = At<std::int32_t>(l.indexer_rows, static_cast<std::size_t>(compact_rows));
  const auto compact_positions = At<std::int32_t>(l.indexer_positions, static_cast<std::size_t>(compact_rows));
  const auto order = At<std::int32_t>(l.indexer_order, positions.size());
  // Local row i is rank i % A's compact row i / A; after the all-gather it sits at
  // (i % A) · compact_rows + i / A.
  for (std::int64_t c = 0; c < compact_rows; ++c) {
    const std::int64_t i = c * ranks + rank;
    const bool real = i < static_cast<std::int64_t>(positions.size());
    rows[c] = real ? static_cast<std::int32_t>(i) : 0;
    compact_positions[c] = real ? positions[i] : 0;
  }
  for (std::size_t i = 0; i < positions.size(); ++i)
    order[i] = static_cast<std::int32_t>((i % ranks) * compact_rows + i / ranks);
  // A sequence's owned rows are consecutive compact rows.
  for (const kernels::SeqAttention& s : seqs_) {
    const std::int32_t first = s.query_start + (rank - s.query_start % ranks + ranks) % ranks;
    if (first >= s.query_start + s.query_len) continue;
    kernels::SeqAttention a = s;
    a.query_start = first / ranks;
    a.query_len = (s.query_start + s.query_len - 1 - first) / ranks + 1;
    a.query_positions = compact_positions.subspan(a.query_start, a.query_len);
    a.decode = false;
    indexer_seqs_.push_back(a);
  }
  view_.indexer_rows = rows;
  view_.indexer_positions = compact_positions;
  view_.indexer_order = order;
  view_.indexer_seqs = indexer_seqs_;
}

void StepInputs::Upload() {
  const std::vector<kernels::InputCopy> all = {{0, layout_.bytes, 1, 0}};
  block_->Upload(all);
}

std::vector<kernels::InputCopy> StepInputs::ReplayCopies(std::int32_t used_width) const {
  const std::size_t sequences = (layout_.bytes - layout_.tables) / (static_cast<std::size_t>(view_.table_width) * 4);
  return {{0, layout_.tables, 1, 0},
          {layout_.tables, static_cast<std::size_t>(used_width) * 4, sequences,
           static_cast<std::size_t>(view_.table_width) * 4}};
}

}  // namespace fission::model
