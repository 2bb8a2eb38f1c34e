// A family's draft layer for speculative decoding (multi-token prediction: DeepSeek's NextN
// layer), as DecoderModel runs it. The shared parts stay DecoderModel's: the target's embedding
// of the next tokens, the rows of the previous step's hidden states, and the target's lm_head
// over the rows whose logits the draft step returns. A family's draft layer declares its own
// cache classes (they follow the family's in the model's memory, in the same pages) and maps the
// two inputs to the hidden state that feeds the lm_head.
#pragma once

#include <vector>

#include "model/memory_spec.h"
#include "model/step_context.h"

namespace fission::model {

class DraftHead {
 public:
  virtual ~DraftHead() = default;
  // Its cache classes (names distinct from the family's).
  virtual std::vector<CacheClass> Memory() const = 0;
  // embedded [rows, hidden]: the target's embedding of each row's next token; previous [rows,
  // hidden]: the hidden state that predicted it (normed, as fed to an lm_head). Writes out [rows,
  // hidden], the row to feed the target's lm_head (and the next chained draft step). `embedded`
  // may be overwritten; `previous` is only read (a captured draft step reads it from its graph's
  // fixed input rows, filled before the replay). `first_class` is the index of its first cache
  // class in the model's memory.
  virtual void Forward(const StepContext& step, const Tensor& embedded, const Tensor& previous, int first_class,
                       const Tensor& out) const = 0;
  // Whether padding rows (model/draft_batch.h, "Padded extends": rows at committed positions with
  // KV slot -1) leave its memory as it is, so that it takes padded extends. By default: when every
  // class it declares is paged at one position per entry, which a row writes only at its KV slot.
  // A layer with per-request state (a sliding window, a compressor's carry-over) or entries of
  // several positions, written from every row of a step whatever its slot, answers false unless
  // it skips such rows itself; its extends then run unpadded, eagerly.
  virtual bool TakesPaddingRows() const {
    for (const CacheClass& c : Memory())
      if (c.kind != CacheKind::kPaged || c.tokens_per_entry != 1) return false;
    return true;
  }
};

}  // namespace fission::model
