#include "model/causal_lm.h"

#include <cstring>

#include "kernels/backend.h"

namespace fission::model {

Buffer HostLogits(StepLogits logits) {
  if (logits.backend == nullptr && !logits.storage.empty()) return std::move(logits.storage);
  Buffer host(DType::kF32, logits.logits.shape);
  if (logits.backend == nullptr) {
    std::memcpy(host.ptr<float>(), logits.logits.data, logits.logits.bytes());
  } else {
    logits.backend->CopyToHost(logits.logits, host.ptr<float>());
  }
  return host;
}

}  // namespace fission::model
