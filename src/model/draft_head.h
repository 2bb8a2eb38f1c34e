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
};

}  // namespace fission::model
