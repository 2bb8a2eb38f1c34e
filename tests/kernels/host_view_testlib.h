// A tensor view of host memory for the CPU kernel tests.
#pragma once

#include "tensor/tensor.h"

namespace fission::kernels::testing {

inline Tensor View(void* data, DType dtype, Shape shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = shape;
  return t;
}

}  // namespace fission::kernels::testing
