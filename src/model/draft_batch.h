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

}  // namespace fission::model
