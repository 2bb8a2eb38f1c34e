#include "tensor/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "base/error.h"

namespace fission {

int DTypeBits(DType dtype) {
  switch (dtype) {
    case DType::kF64:
    case DType::kI64: return 64;
    case DType::kF32:
    case DType::kI32: return 32;
    case DType::kF16:
    case DType::kBF16:
    case DType::kI16: return 16;
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kE8M0:
    case DType::kI8:
    case DType::kU8:
    case DType::kBool: return 8;
    case DType::kF4E2M1: return 4;
  }
  return 0;
}

std::size_t DTypeBytes(DType dtype, std::int64_t count) {
  return static_cast<std::size_t>((count * DTypeBits(dtype) + 7) / 8);
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
    case DType::kE8M0: return "F8_E8M0";
    case DType::kF4E2M1: return "F4";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI16: return "I16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
    case DType::kF64: return "F64";
  }
  return "?";
}

bool ParseSafetensorsDType(std::string_view name, DType* out) {
  static constexpr struct {
    std::string_view name;
    DType dtype;
  } kNames[] = {{"F32", DType::kF32},         {"F16", DType::kF16},         {"BF16", DType::kBF16},
                {"F8_E4M3", DType::kF8E4M3},  {"F8_E5M2", DType::kF8E5M2},  {"F8_E8M0", DType::kE8M0},
                {"F8_E8M0FNU", DType::kE8M0}, {"F4", DType::kF4E2M1},       {"F4_E2M1", DType::kF4E2M1},
                {"I64", DType::kI64},         {"I32", DType::kI32},         {"I16", DType::kI16},
                {"I8", DType::kI8},           {"U8", DType::kU8},           {"BOOL", DType::kBool},
                {"F64", DType::kF64}};
  for (const auto& entry : kNames) {
    if (entry.name == name) {
      *out = entry.dtype;
      return true;
    }
  }
  return false;
}

// ---- 16-bit floats -------------------------------------------------------------------------------

float Bf16ToF32(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

std::uint16_t F32ToBf16(float value) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((u >> 16) | 0x0040);  // keep sign, quiet
  const std::uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

float F16ToF32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000) << 16;
  const int exponent = (bits >> 10) & 0x1F;
  const std::uint32_t mantissa = bits & 0x3FF;
  float magnitude;
  if (exponent == 0x1F) {
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(magnitude) | sign);
}

namespace {

// Rounds |value| (finite, non-negative) to a float format with `mantissa_bits` explicit mantissa
// bits, exponent bias `bias` and smallest normal exponent 1, returning the code without the sign.
// Codes past the top of the format come out as (max_code + 1 ...): callers handle overflow.
std::uint32_t RoundToSmallFloat(float magnitude, int mantissa_bits, int bias) {
  if (magnitude == 0.0f) return 0;
  int exponent;  // magnitude = frac * 2^exponent, frac in [0.5, 1)
  std::frexp(magnitude, &exponent);
  int biased = exponent - 1 + bias;  // exponent field if normal
  // Quantum (value of one mantissa unit) for this binade, subnormals share the binade of exponent 1.
  const int unit_exponent = (biased >= 1 ? exponent - 1 : 1 - bias) - mantissa_bits;
  const double scaled = std::ldexp(static_cast<double>(magnitude), -unit_exponent);  // exact
  const auto units = static_cast<std::uint32_t>(std::nearbyint(scaled));  // nearest, ties to even
  // units counts quanta from zero within this binade (includes the implicit bit when normal).
  const std::uint32_t implicit = 1u << mantissa_bits;
  if (biased < 1) {
    // Subnormal: code is the unit count directly; if it rounded up to `implicit` it is the smallest normal.
    return units;
  }
  // Normal: units in [implicit, 2*implicit]; 2*implicit means the next binade.
  return static_cast<std::uint32_t>(biased) * implicit + (units - implicit);
}

}  // namespace

std::uint16_t F32ToF16(float value) {
  const std::uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7E00;
  const float magnitude = std::fabs(value);
  if (std::isinf(value)) return sign | 0x7C00;
  std::uint32_t code = RoundToSmallFloat(magnitude, 10, 15);
  if (code >= 0x7C00) code = 0x7C00;  // IEEE overflow to infinity
  return static_cast<std::uint16_t>(sign | code);
}

// ---- 8-bit floats --------------------------------------------------------------------------------

float F8E4M3ToF32(std::uint8_t bits) {
  const bool negative = bits & 0x80;
  const int exponent = (bits >> 3) & 0xF;
  const int mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x8), exponent - 10);
  }
  return negative ? -magnitude : magnitude;
}

std::uint8_t F32ToF8E4M3(float value, Overflow overflow) {
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return sign | 0x7F;
  constexpr std::uint32_t kMaxCode = 0x7E;  // 448
  if (std::isinf(value)) return overflow == Overflow::kSaturate ? (sign | kMaxCode) : (sign | 0x7F);
  std::uint32_t code = RoundToSmallFloat(std::fabs(value), 3, 7);
  if (code > kMaxCode) return overflow == Overflow::kSaturate ? (sign | kMaxCode) : (sign | 0x7F);
  return static_cast<std::uint8_t>(sign | code);
}

float F8E5M2ToF32(std::uint8_t bits) { return F16ToF32(static_cast<std::uint16_t>(bits) << 8); }

std::uint8_t F32ToF8E5M2(float value, Overflow overflow) {
  const std::uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return sign | 0x7E;
  constexpr std::uint32_t kMaxCode = 0x7B;  // 57344
  if (std::isinf(value)) return overflow == Overflow::kSaturate ? (sign | kMaxCode) : (sign | 0x7C);
  std::uint32_t code = RoundToSmallFloat(std::fabs(value), 2, 15);
  if (code > kMaxCode) return overflow == Overflow::kSaturate ? (sign | kMaxCode) : (sign | 0x7C);
  return static_cast<std::uint8_t>(sign | code);
}

float E8M0ToF32(std::uint8_t bits) {
  if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

std::uint8_t F32ToE8M0(float value) {
  if (std::isnan(value) || value < 0.0f) return 0xFF;
  if (value == 0.0f) return 0;
  if (std::isinf(value)) return 0xFE;
  int exponent;
  const double frac = std::frexp(static_cast<double>(value), &exponent);  // value = frac * 2^exponent
  // value = (2 * frac) * 2^(exponent - 1) with 2*frac in [1, 2): round between 2^(e-1) and 2^e.
  int e = exponent - 1;
  const double m = 2.0 * frac;
  if (m > 1.5 || (m == 1.5 && ((e + 127) & 1))) e += 1;
  const int code = e + 127;
  if (code < 0) return 0;
  if (code > 0xFE) return 0xFE;
  return static_cast<std::uint8_t>(code);
}

// ---- fp4 -----------------------------------------------------------------------------------------

float F4E2M1ToF32(std::uint8_t nibble) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float magnitude = kValues[nibble & 0x7];
  return (nibble & 0x8) ? -magnitude : magnitude;
}

std::uint8_t F32ToF4E2M1(float value) {
  if (std::isnan(value)) return 0;
  const std::uint8_t sign = std::signbit(value) ? 0x8 : 0;
  const float magnitude = std::fabs(value);
  if (magnitude >= 6.0f || std::isinf(value)) return sign | 0x7;
  std::uint32_t code = RoundToSmallFloat(magnitude, 1, 1);
  if (code > 0x7) code = 0x7;
  return static_cast<std::uint8_t>(sign | code);
}

// ---- bulk ----------------------------------------------------------------------------------------

void ConvertToF32(DType dtype, const void* src, float* dst, std::int64_t count) {
  const auto* bytes = static_cast<const std::uint8_t*>(src);
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, count * 4); return;
    case DType::kF64:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(static_cast<const double*>(src)[i]);
      return;
    case DType::kBF16: {
      const auto* p = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < count; ++i) dst[i] = Bf16ToF32(p[i]);
      return;
    }
    case DType::kF16: {
      const auto* p = static_cast<const std::uint16_t*>(src);
      for (std::int64_t i = 0; i < count; ++i) dst[i] = F16ToF32(p[i]);
      return;
    }
    case DType::kF8E4M3:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = F8E4M3ToF32(bytes[i]);
      return;
    case DType::kF8E5M2:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = F8E5M2ToF32(bytes[i]);
      return;
    case DType::kE8M0:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = E8M0ToF32(bytes[i]);
      return;
    case DType::kF4E2M1:
      for (std::int64_t i = 0; i < count; ++i) {
        const std::uint8_t byte = bytes[i / 2];
        dst[i] = F4E2M1ToF32((i % 2 == 0) ? (byte & 0xF) : (byte >> 4));
      }
      return;
    case DType::kI64:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(static_cast<const std::int64_t*>(src)[i]);
      return;
    case DType::kI32:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(static_cast<const std::int32_t*>(src)[i]);
      return;
    case DType::kI16:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(static_cast<const std::int16_t*>(src)[i]);
      return;
    case DType::kI8:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(static_cast<const std::int8_t*>(src)[i]);
      return;
    case DType::kU8:
    case DType::kBool:
      for (std::int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(bytes[i]);
      return;
  }
  FISSION_CHECK(false, "unhandled dtype");
}

void ConvertFromF32(DType dtype, const float* src, void* dst, std::int64_t count) {
  auto* bytes = static_cast<std::uint8_t*>(dst);
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, count * 4); return;
    case DType::kBF16:
      for (std::int64_t i = 0; i < count; ++i) static_cast<std::uint16_t*>(dst)[i] = F32ToBf16(src[i]);
      return;
    case DType::kF16:
      for (std::int64_t i = 0; i < count; ++i) static_cast<std::uint16_t*>(dst)[i] = F32ToF16(src[i]);
      return;
    case DType::kF8E4M3:
      for (std::int64_t i = 0; i < count; ++i) bytes[i] = F32ToF8E4M3(src[i]);
      return;
    case DType::kF8E5M2:
      for (std::int64_t i = 0; i < count; ++i) bytes[i] = F32ToF8E5M2(src[i]);
      return;
    case DType::kE8M0:
      for (std::int64_t i = 0; i < count; ++i) bytes[i] = F32ToE8M0(src[i]);
      return;
    case DType::kF4E2M1:
      std::memset(dst, 0, DTypeBytes(dtype, count));
      for (std::int64_t i = 0; i < count; ++i) bytes[i / 2] |= F32ToF4E2M1(src[i]) << ((i % 2) * 4);
      return;
    default: FISSION_CHECK(false, "ConvertFromF32: not a float dtype: ", DTypeName(dtype));
  }
}

}  // namespace fission
