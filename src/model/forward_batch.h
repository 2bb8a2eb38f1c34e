// The model runner contract: what one step asks of the model.
//
// The engine flattens all scheduled sequences of a step (prefill chunks and decode tokens alike)
// into one token stream. Each sequence says where its new tokens sit in that stream, how many of its
// tokens are already in the model's memory, which pages hold them and which state slot holds its
// per-request state (model/memory_spec.h). The model writes the entries of every new token
// (`kv_slots[i]` is its slot in a paged class of one token per entry), attends each new token
// causally to all of its sequence's tokens (cached and new), and returns logits only for the rows
// listed in `logits_indices`. A sequence whose context_len is 0 starts afresh: its state slot
// holds nothing of it yet.
#pragma once

#include <cstdint>
#include <vector>

namespace fission::model {

struct SequenceSlice {
  std::int32_t query_start = 0;  // index of the sequence's first new token in ForwardBatch::token_ids
  std::int32_t query_len = 0;    // new tokens in this step
  std::int32_t context_len = 0;  // tokens already in the cache (prefix-cache hit, earlier chunks)
  // Pages holding token positions [0, context_len + query_len): position p lives in
  // page block_table[p / page_size] at row p % page_size.
  std::vector<std::int32_t> block_table;
  // The sequence's slot in the per-request classes; -1 for a model without per-request state.
  std::int32_t state_slot = -1;
  // A speculative verify run: the sequence's last token and its draft tokens. The model computes
  // it as it computes a decode token (MLA's absorbed form, never split over the CP group), so each
  // row's logits are those a plain decode step would give at that position. In a draft step: a
  // padded extend's sequence (model/draft_batch.h), whose rows are decode rows likewise.
  bool verify = false;

  std::int32_t kv_len() const { return context_len + query_len; }
};

// Data-parallel attention: one DP group's step as every group's ranks must know it to meet at the
// feed-forward (model/token_layout.h).
struct DpGroupShape {
  std::int32_t num_tokens = 0;  // 0: the group has no work and runs an empty step
  bool prefill = false;         // some sequence has several new tokens (and is not a verify run)
  bool operator==(const DpGroupShape&) const = default;
};

struct ForwardBatch {
  std::vector<std::int32_t> token_ids;  // [num_tokens]
  std::vector<std::int32_t> positions;  // [num_tokens]; context_len + offset within the sequence
  std::vector<SequenceSlice> sequences;
  std::vector<std::int64_t> kv_slots;        // [num_tokens]; page * page_size + row for each new token
  std::vector<std::int32_t> logits_indices;  // token rows whose logits are returned, in this order
  // Data-parallel attention (set by the parallel model): every DP group's shape this step and
  // which group this batch is; empty with one group.
  std::vector<DpGroupShape> dp_groups;
  std::int32_t dp_rank = 0;

  std::int32_t num_tokens() const { return static_cast<std::int32_t>(token_ids.size()); }
};

}  // namespace fission::model
