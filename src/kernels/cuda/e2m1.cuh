// e2m1 (OCP FP4) on the device: rounding an fp32 value to a code, as F32ToF4E2M1 does on the host
// (tensor/dtype.cc): the MX quantizer's activations (moe_mx.cu) and the dummy FP4 weights
// (random_fill.cu).
#pragma once

#include <cstdint>

namespace fission::kernels::cuda {

// e2m1 of |v| (v already divided by the block scale), round to nearest, ties to the even code,
// saturating: the thresholds of F32ToF4E2M1 (tensor/dtype.cc), as the doubled value.
__device__ __forceinline__ int DoubledE2m1(float a) {
  if (a <= 0.25f) return 0;
  if (a < 0.75f) return 1;
  if (a <= 1.25f) return 2;
  if (a < 1.75f) return 3;
  if (a <= 2.5f) return 4;
  if (a < 3.5f) return 6;
  if (a <= 5.0f) return 8;
  return 12;
}

// The 4-bit code of v (sign in bit 3; NaN gives +0, as on the host).
__device__ __forceinline__ std::uint32_t E2m1Code(float v) {
  if (isnan(v)) return 0;
  const int d = DoubledE2m1(fabsf(v));
  const std::uint32_t magnitude = d <= 4 ? d : d == 6 ? 5 : d == 8 ? 6 : 7;
  return (signbit(v) ? 8u : 0u) | magnitude;
}

}  // namespace fission::kernels::cuda
