// Element types and their conversions to and from fp32.
//
// Narrow floats follow the OCP 8-bit floating point (OFP8) and microscaling (MX) specifications:
//   e4m3fn: bias 7, no infinities, NaN = S.1111.111, max 448.
//   e5m2:   bias 15, IEEE-like infinities and NaNs, max 57344.
//   e8m0:   scale exponent, value 2^(code-127), code 0xFF = NaN, no sign and no zero.
//   e2m1:   fp4, values 0, 0.5, 1, 1.5, 2, 3, 4, 6 with a sign; packed two per byte, the even
//           element in the low nibble.
// Every conversion from fp32 rounds to nearest, ties to even. Overflow saturates to the largest
// finite value (the OCP "saturating" mode, the one quantizers use) unless kOverflowToNan/Inf is
// asked for. Details per type are in the .cc file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fission {

enum class DType : std::uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kE8M0,
  kF4E2M1,  // two elements per byte
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  kF64,
};

// Bits per element (4 for fp4, so sizes are computed in bits first).
int DTypeBits(DType dtype);
// Bytes for `count` elements (fp4: rounded up to whole bytes).
std::size_t DTypeBytes(DType dtype, std::int64_t count);
std::string_view DTypeName(DType dtype);
// Parses a safetensors dtype name ("F32", "BF16", "F8_E4M3", "F8_E8M0", ...); false if unknown.
bool ParseSafetensorsDType(std::string_view name, DType* out);

enum class Overflow { kSaturate, kNonSaturating };

// Scalar conversions.
float Bf16ToF32(std::uint16_t bits);
std::uint16_t F32ToBf16(float value);
float F16ToF32(std::uint16_t bits);
std::uint16_t F32ToF16(float value);
float F8E4M3ToF32(std::uint8_t bits);
// kNonSaturating maps overflow (and infinities) to NaN, as e4m3fn has no infinity.
std::uint8_t F32ToF8E4M3(float value, Overflow overflow = Overflow::kSaturate);
float F8E5M2ToF32(std::uint8_t bits);
// kNonSaturating maps overflow to infinity.
std::uint8_t F32ToF8E5M2(float value, Overflow overflow = Overflow::kSaturate);
float E8M0ToF32(std::uint8_t bits);
// Nearest power of two (ties to the even code); zero and underflow give code 0 (2^-127), negative
// values and NaN give NaN (0xFF), overflow saturates to 2^127 (0xFE).
std::uint8_t F32ToE8M0(float value);
float F4E2M1ToF32(std::uint8_t nibble);
// NaN has no fp4 code; it converts to +0 (documented choice). Overflow saturates to +-6.
std::uint8_t F32ToF4E2M1(float value);

// Converts `count` elements of `src` (any floating dtype, or an integer type) to fp32.
void ConvertToF32(DType dtype, const void* src, float* dst, std::int64_t count);
// Converts fp32 to `dtype` (floating types only), rounding to nearest even.
void ConvertFromF32(DType dtype, const float* src, void* dst, std::int64_t count);

}  // namespace fission
