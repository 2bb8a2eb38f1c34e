// e2m1 (OCP FP4) on the device: rounding an fp32 value to a code, as F32ToF4E2M1 does on the host
// (tensor/dtype.cc): the MX quantizer's activations (moe_mx.cu) and the dummy FP4 weights
// (random_fill.cu); and the W4A8 kernels' decode of codes into e4m3 and of e8m0 scale codes into
// floats (moe_fp4.cu's GEMV, moe_grouped.cu's GEMM).
#pragma once

#include <cstdint>

#include "kernels/cuda/mma_gemv.cuh"  // Prmt

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

// Eight e2m1 codes (value i in nibble i of w, low nibble first) as e4m3 bytes, each 2^-6 times its
// value: codes 0..3 into `first`, 4..7 into `second`, byte i holding code i. A code s|e1 e0|m placed
// as the e4m3 byte s|0 0 e1 e0|m 0 0 is exact (code 0.5 lands on e4m3's subnormals).
__device__ __forceinline__ void E2m1ToE4m3(std::uint32_t w, std::uint32_t& first, std::uint32_t& second) {
  const std::uint32_t lo = ((w << 2) & 0x1C1C1C1Cu) | ((w << 4) & 0x80808080u);  // codes 0, 2, 4, 6
  const std::uint32_t hi = ((w >> 2) & 0x1C1C1C1Cu) | (w & 0x80808080u);         // codes 1, 3, 5, 7
  first = Prmt(lo, hi, 0x5140u);
  second = Prmt(lo, hi, 0x7362u);
}

// Byte j of four e8m0 scale codes as a float: 2^(s - 127) for 1 <= s <= 254 (the exponent field
// itself); ScaleOfExact also takes 0 (2^-127, subnormal) and 0xFF (NaN), as the CPU decodes them.
__device__ __forceinline__ float ScaleOf(std::uint32_t four, int j) {
  return __uint_as_float(((four >> (8 * j)) & 0xFFu) << 23);
}
__device__ __forceinline__ float ScaleOfExact(std::uint32_t four, int j) {
  const std::uint32_t s = (four >> (8 * j)) & 0xFFu;
  return s == 0u ? __uint_as_float(0x00400000u) : s == 0xFFu ? __uint_as_float(0x7FC00000u) : __uint_as_float(s << 23);
}

}  // namespace fission::kernels::cuda
