// The step-input block: a step's metadata, built once per step on the host into one block that is
// mirrored to the device in one copy (kernels/input_block.h). Every operation reads it through the
// spans of a StepView, so no layer derives or uploads step metadata again; eager steps and
// captured ones (model/decode_graphs.h) fill the same kind of block the same way.
//
// The block holds, for this rank: its token ids and positions, the KV slot of every token of the
// step (all ranks write the full KV), the entry slots of paged classes that cover several tokens,
// the logits rows, the state slot of every sequence, the token layout's index arrays (rows after a
// CP all-gather, this rank's rows, the logit rows, the vocabulary gather order), what the family
// derives from the step (FamilyInputs) and, last, the block tables at one width (so a replay
// copies only their used columns).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/memory_spec.h"
#include "model/token_layout.h"

namespace fission::model {

struct StepView {
  std::span<const std::int32_t> token_ids;       // [rows] this rank's rows
  std::span<const std::int32_t> all_token_ids;   // [tokens] every token of the step, in token order
  std::span<const std::int32_t> positions;       // [rows]
  std::span<const std::int64_t> kv_slots;        // [tokens] every token of the step, one entry per token
  std::span<const std::int32_t> logits_indices;  // [m] batch rows whose logits are returned
  std::span<const std::int32_t> state_slots;     // [sequences] (-1: none)
  std::span<const std::int32_t> block_tables;    // [sequences, table_width]
  // This rank's queries by sequence, and the same split by kernels::SeqAttention::decode.
  std::span<const kernels::SeqAttention> seqs, decode_seqs, prefill_seqs;
  // Every sequence of the step over all its new tokens in token order (query_start = token_start,
  // query_len = new_tokens, no query_positions): what an operation over the gathered rows of every
  // token (a compressor writing the full state on every rank) iterates.
  std::span<const kernels::SeqAttention> token_seqs;
  // The token layout's arrays (token_layout.h).
  std::span<const std::int32_t> gathered_rows;  // [tokens] token i's row after a CP all-gather
  std::span<const std::int32_t> own_rows;       // [rows] this rank's rows among the gathered ones
  std::span<const std::int32_t> logit_rows;     // [m] the logits rows among the (gathered) hidden states
  std::span<const std::int32_t> vocab_order;    // [A·m] vocab gather order (A: attention-TP ranks)
  // The indexer's query split over the attention-TP group (when on, for steps with prefill work):
  // this rank scores local rows i with i % A == its attention-TP rank, gathered compactly
  // (`indexer_rows`, padded with row 0 to ceil(rows / A)), as `indexer_seqs` over the compact rows;
  // `indexer_order` puts the group's all-gathered selections back in row order. Empty otherwise.
  std::span<const std::int32_t> indexer_rows, indexer_positions, indexer_order;
  std::span<const kernels::SeqAttention> indexer_seqs;
  // Per cache class of the model's memory: the entry slot of every token of the step in a paged
  // class (kv_slots itself when an entry is one token); empty for per-request classes.
  std::vector<std::span<const std::int64_t>> entry_slots;
  // What the model's family wrote for this step (FamilyInputs), empty for most families.
  std::span<const std::byte> family;
  int cp_size = 1, cp_rank = 0;
  std::int32_t rows = 0, num_tokens = 0, table_width = 0;
  // PcpPlan's: this rank's rows that are tokens, every DP group's feed-forward rows (empty with
  // one group) and this rank's group, the step's tokens over every group. Host only.
  std::int32_t real_rows = 0;
  std::vector<std::int32_t> dp_rows;
  int dp_rank = 0;
  std::int64_t step_tokens = 0;
  std::int64_t page_size = 0;

  bool split() const { return cp_size > 1; }
  bool splits_indexer() const { return !indexer_order.empty(); }
};

// Metadata a family derives from every step beyond the arrays above (DeepSeek-V4's step plan,
// model/layers/v4_step_plan.h): written into the block with the step, so its operations read it
// from the block's device copy and a captured step's replay carries it like the rest.
class FamilyInputs {
 public:
  virtual ~FamilyInputs() = default;
  // The bytes a step of these counts needs: at least what Write writes for any such step.
  virtual std::size_t Bytes(std::int64_t rows, std::int64_t tokens, std::int64_t sequences) const = 0;
  // Writes the step of `view` (every array above written) into `region` (Bytes long).
  virtual void Write(const StepView& view, std::span<std::byte> region) const = 0;
};

class StepInputs {
 public:
  // A block on `backend` for a model of `spec` and `vocab_ranks` attention-TP ranks, with the
  // family's own inputs (`family`, may be null; it must outlive this). A fixed block
  // (`fixed_bytes` > 0, graphs hold its addresses) never moves; otherwise it grows as steps need.
  StepInputs(kernels::Backend& backend, MemorySpec spec, int vocab_ranks, std::size_t fixed_bytes = 0,
             const FamilyInputs* family = nullptr);

  // Writes `batch` as `plan` splits it and returns its view. `table_width` pages per sequence (0:
  // the step's longest table).
  const StepView& Write(const ForwardBatch& batch, const PcpPlan& plan, std::int64_t page_size,
                        std::int32_t table_width = 0);
  // Split DeepSeek Sparse Attention's indexer queries over `ranks` attention-TP ranks (this is
  // `rank`) in steps with prefill work (StepView::indexer_rows). Off (1 rank) by default.
  void SplitIndexerQueries(int ranks, int rank);
  // Copies the written step to the device in one copy.
  void Upload();
  // The copies a replay makes: everything before the tables, then their first `used_width`
  // columns.
  std::vector<kernels::InputCopy> ReplayCopies(std::int32_t used_width) const;
  // Bytes a step of these counts takes (a fixed block is made for the largest).
  std::size_t BytesFor(std::int64_t rows, std::int64_t tokens, std::int64_t logits, std::int64_t sequences,
                       std::int64_t table_width) const;
  const StepView& view() const { return view_; }
  kernels::InputBlock& block() { return *block_; }

 private:
  struct Layout {
    std::size_t token_ids, all_token_ids, positions, kv_slots, entry_slots, logits, state_slots, gathered, own, logit_rows,
        vocab_order, indexer_rows, indexer_positions, indexer_order, family, tables, bytes;
  };
  // `indexer_rows`: the compact rows of the indexer's query split (0 when it is off).
  Layout MakeLayout(std::int64_t rows, std::int64_t tokens, std::int64_t logits, std::int64_t sequences,
                    std::int64_t table_width, std::int64_t indexer_rows = 0) const;
  // StepView's indexer arrays for this rank's share of the queries.
  void WriteIndexerSplit(const Layout& l, std::span<const std::int32_t> positions, std::int64_t compact_rows);
  template <typename T>
  std::span<T> At(std::size_t offset, std::size_t count) {
    return {reinterpret_cast<T*>(host_.data() + offset), count};
  }

  kernels::Backend& backend_;
  MemorySpec spec_;
  std::vector<int> multi_token_classes_;  // paged classes whose entries cover several tokens
  int vocab_ranks_;
  bool fixed_;
  const FamilyInputs* family_;
  std::unique_ptr<kernels::InputBlock> block_;
  std::span<std::byte> host_;
  Layout layout_{};
  StepView view_;
  std::vector<kernels::SeqAttention> seqs_, decode_seqs_, prefill_seqs_, indexer_seqs_, token_seqs_;
  int indexer_ranks_ = 1, indexer_rank_ = 0;
};

}  // namespace fission::model
