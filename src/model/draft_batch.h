// The model runner contract of speculative decoding with the model's own draft (MTP / NextN)
// layers: what one draft step asks of the model.
//
// A draft row at position p reads two inputs: the token at position p + 1 (its embedding) and the
// hidden state that predicted that token (the row that fed the lm_head), and predicts the token at
// position p + 2. After a target step (a prefill chunk, or a verify run of a token and its drafts)
// the draft *extends* over the rows whose tokens are now known, reading the target's hidden states
// of that step (Source::kTarget); each further draft step *chains*, one row per sequence, reading
// the draft's own output of the previous draft step (Source::kDraft). The draft layer writes its
// own cache class at the positions of its rows, in the same pages as the target (one block table
// per sequence: model/memory_spec.h).
//
// **Padded extends** (a fixed shape, so that a CUDA graph takes them: model/decode_graphs.h). A
// model whose CausalLM::padded_extend_rows() is T > 0 takes the extend after a verify run (or a
// one-token decode) as T rows of that sequence at consecutive positions ending at its last
// committed row, `verify` set (its rows are decode rows, as a verify run's are). The committed
// rows are the last ones; the T - rows before them are *padding rows* at positions the sequence
// has already committed (so they attend only keys the draft cache holds, inside the block table,
// and the sequence's kv_len is that of its committed rows): token 0, KV slot -1 (they write
// nothing), any valid hidden row, and their outputs are dropped. Only the last row's logits are
// asked for, so every sequence's logits row is its last row, at a fixed place in the step. A
// sequence with fewer than T positions up to its last row is not padded (its step then runs as it
// is). Padding rows recompute rows that are already in the cache without writing them: a draft
// layer with per-request state or entries of several positions would fold them in, so such a
// layer does not take padded extends (DraftHead::TakesPaddingRows).
#pragma once

#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace fission::model {

struct DraftBatch {
  enum class Source : std::uint8_t { kTarget, kDraft };
  // token_ids: the next token of each row; positions, sequences, kv_slots and logits_indices as in
  // a target step (the draft's logits come back for logits_indices, in order).
  ForwardBatch batch;
  Source source = Source::kTarget;
  // [num_tokens]: the row of the source step's hidden states feeding each token (an index into
  // that step's token stream).
  std::vector<std::int32_t> hidden_rows;
};

// One sequence's rows in a draft extend: its committed rows at positions [first, first + rows),
// after `padding` padding rows at the positions just before them.
struct ExtendRows {
  std::int32_t first = 0, rows = 0, padding = 0;
  std::int32_t begin() const { return first - padding; }  // the position of the sequence's first row
  std::int32_t size() const { return padding + rows; }
};

// The rows of an extend of `rows` committed rows from position `first` padded to `t` rows a
// sequence (t = 0: not padded). A sequence with more rows than t, or with fewer than t positions
// up to its last row, is not padded.
inline ExtendRows PadExtend(std::int32_t first, std::int32_t rows, std::int32_t t) {
  ExtendRows r{first, rows, 0};
  if (t > 0 && rows <= t && first + rows >= t) r.padding = t - rows;
  return r;
}

}  // namespace fission::model
