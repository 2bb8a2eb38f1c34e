// A weight as a model holds it: the buffers it owns on the backend and the format they are stored
// in (tensor/weight.h). Loaded by WeightLoader (model/weights.h): a plain matrix (fp32 or bf16), or
// FP8 e4m3 codes with fp32 128×128 block scales (DeepSeek-V3's checkpoint format, kept as stored on
// a device). Operations take its view and dispatch on the format.
#pragma once

#include "tensor/weight.h"

namespace fission::model {

struct Weight {
  Buffer values;  // [out, in] of format.values
  Buffer scales;  // the block grid of format.scales; empty when plain
  WeightFormat format;

  static Weight Plain(Buffer values) {
    const DType dtype = values.tensor().dtype;
    return {std::move(values), {}, WeightFormat::Plain(dtype)};
  }
  bool quantized() const { return format.quantized(); }
  WeightView view() const { return {values.tensor(), scales.tensor(), format}; }
  operator WeightView() const { return view(); }  // NOLINT: passed straight to operations
};

}  // namespace fission::model
