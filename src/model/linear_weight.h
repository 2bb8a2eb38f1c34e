// A Linear layer's weight as the backend holds it: a plain matrix (fp32 or bf16), or FP8 e4m3 codes
// with fp32 128×128 block scales (DeepSeek-V3's checkpoint format, kept as stored on a device).
#pragma once

#include "kernels/backend.h"

namespace fission::model {

struct LinearWeight {
  Buffer weight;  // [out, in]
  Buffer scale;   // [⌈out/128⌉, ⌈in/128⌉] fp32 when weight is e4m3, else empty

  bool fp8() const { return !scale.empty(); }
  // out = x · weightᵀ, through Backend::LinearFp8 for FP8 weights and Backend::Linear otherwise.
  void Forward(kernels::Backend& b, const Tensor& x, const Tensor& out) const {
    if (fp8()) {
      b.LinearFp8(x, weight, scale, out);
    } else {
      b.Linear(x, weight, out);
    }
  }
};

}  // namespace fission::model
