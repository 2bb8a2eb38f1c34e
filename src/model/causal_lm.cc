#include "model/causal_lm.h"

#include "kernels/backend.h"

namespace fission::model {

Buffer HostLogits(StepLogits logits) {
  if (logits.backend == nullptr) return std::move(logits.logits);
  Buffer host(DType::kF32, logits.logits.tensor().shape);
  logits.backend->CopyToHost(logits.logits.tensor(), host.ptr<float>());
  return host;
}

}  // namespace fission::model
