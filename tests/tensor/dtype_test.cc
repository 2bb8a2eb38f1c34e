// Narrow float conversions, checked over every code of each format.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/dtype.h"

namespace fission {
namespace {

// Every finite code decodes to a value that encodes back to the same code (−0 keeps its sign).
TEST(DType, E4M3RoundTripsEveryCode) {
  for (int code = 0; code < 256; ++code) {
    const float v = F8E4M3ToF32(static_cast<std::uint8_t>(code));
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(v)) << code;
      EXPECT_EQ(F32ToF8E4M3(v) & 0x7F, 0x7F);
      continue;
    }
    EXPECT_EQ(F32ToF8E4M3(v), code) << "value " << v;
  }
  EXPECT_EQ(F8E4M3ToF32(0x7E), 448.0f);
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
}

TEST(DType, E5M2RoundTripsEveryCode) {
  for (int code = 0; code < 256; ++code) {
    const float v = F8E5M2ToF32(static_cast<std::uint8_t>(code));
    if ((code & 0x7F) > 0x7C) {
      EXPECT_TRUE(std::isnan(v)) << code;
      continue;
    }
    if ((code & 0x7F) == 0x7C) {
      EXPECT_TRUE(std::isinf(v));
      EXPECT_EQ(F32ToF8E5M2(v, Overflow::kNonSaturating), code);
      EXPECT_EQ(F32ToF8E5M2(v), (code & 0x80) | 0x7B);  // saturating: inf -> max finite
      continue;
    }
    EXPECT_EQ(F32ToF8E5M2(v), code) << "value " << v;
  }
  EXPECT_EQ(F8E5M2ToF32(0x7B), 57344.0f);
}

TEST(DType, SixteenBitFormatsRoundTripEveryCode) {
  for (std::uint32_t code = 0; code < 65536; ++code) {
    const auto c = static_cast<std::uint16_t>(code);
    const float b = Bf16ToF32(c);
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(b))));
    } else {
      EXPECT_EQ(F32ToBf16(b), c);
    }
    const float h = F16ToF32(c);
    if (std::isnan(h)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(h))));
    } else {
      EXPECT_EQ(F32ToF16(h), c) << code;
    }
  }
}

// Between every pair of adjacent representable values: the midpoint goes to the even code, and
// anything off the midpoint goes to the nearer one.
template <typename Decode, typename Encode>
void CheckNearestEven(int num_codes, int max_code, Decode decode, Encode encode) {
  for (int code = 0; code < max_code; ++code) {
    const double lo = decode(code), hi = decode(code + 1);
    const double mid = (lo + hi) / 2;
    const int even = (code % 2 == 0) ? code : code + 1;
    EXPECT_EQ(encode(static_cast<float>(mid)), even) << "midpoint after code " << code;
    EXPECT_EQ(encode(static_cast<float>(mid - (hi - lo) / 8)), code) << "below midpoint after " << code;
    EXPECT_EQ(encode(static_cast<float>(mid + (hi - lo) / 8)), code + 1) << "above midpoint after " << code;
    // Negative values mirror positive ones.
    EXPECT_EQ(encode(static_cast<float>(-mid)), even | (num_codes / 2));
  }
}

TEST(DType, RoundsToNearestEvenBetweenEveryPairOfCodes) {
  CheckNearestEven(256, 0x7E, [](int c) { return F8E4M3ToF32(c); }, [](float v) { return F32ToF8E4M3(v); });
  CheckNearestEven(256, 0x7B, [](int c) { return F8E5M2ToF32(c); }, [](float v) { return F32ToF8E5M2(v); });
  CheckNearestEven(16, 0x7, [](int c) { return F4E2M1ToF32(c); }, [](float v) { return F32ToF4E2M1(v); });
  CheckNearestEven(65536, 0x7BFF, [](int c) { return F16ToF32(c); }, [](float v) { return F32ToF16(v); });
}

TEST(DType, OverflowSaturatesOrNot) {
  EXPECT_EQ(F32ToF8E4M3(1e6f), 0x7E);
  EXPECT_EQ(F32ToF8E4M3(-1e6f), 0xFE);
  EXPECT_EQ(F32ToF8E4M3(464.0f), 0x7E);  // just past 448, rounds down
  EXPECT_EQ(F32ToF8E4M3(1e6f, Overflow::kNonSaturating), 0x7F);
  EXPECT_EQ(F32ToF8E4M3(std::numeric_limits<float>::infinity()), 0x7E);
  EXPECT_EQ(F32ToF8E4M3(std::numeric_limits<float>::infinity(), Overflow::kNonSaturating), 0x7F);
  EXPECT_EQ(F32ToF8E5M2(1e6f), 0x7B);
  EXPECT_EQ(F32ToF8E5M2(1e6f, Overflow::kNonSaturating), 0x7C);
  EXPECT_EQ(F32ToF4E2M1(100.0f), 0x7);
  EXPECT_EQ(F32ToF4E2M1(-7.0f), 0xF);
  EXPECT_EQ(F32ToF16(1e6f), 0x7C00);
  EXPECT_EQ(F32ToF8E4M3(1e-9f), 0x00);  // underflow to zero
}

TEST(DType, E8M0CodesAndRounding) {
  for (int code = 0; code < 255; ++code) {
    const float v = E8M0ToF32(static_cast<std::uint8_t>(code));
    EXPECT_EQ(v, std::ldexp(1.0f, code - 127));
    EXPECT_EQ(F32ToE8M0(v), code);
    if (code < 254) {
      // 1.5 × 2^e is the midpoint: ties go to the even code.
      const float mid = 1.5f * v;
      EXPECT_EQ(F32ToE8M0(mid), (code % 2 == 0) ? code : code + 1) << code;
      EXPECT_EQ(F32ToE8M0(1.4f * v), code);
      EXPECT_EQ(F32ToE8M0(1.6f * v), code + 1);
    }
  }
  EXPECT_TRUE(std::isnan(E8M0ToF32(0xFF)));
  EXPECT_EQ(F32ToE8M0(-1.0f), 0xFF);
  EXPECT_EQ(F32ToE8M0(std::nanf("")), 0xFF);
  EXPECT_EQ(F32ToE8M0(0.0f), 0x00);
}

TEST(DType, Fp4PacksTwoPerByteLowNibbleFirst) {
  const std::vector<float> values = {0.5f, -6.0f, 3.0f, 1.0f, 2.0f};
  std::vector<std::uint8_t> packed(DTypeBytes(DType::kF4E2M1, 5));
  ASSERT_EQ(packed.size(), 3u);
  ConvertFromF32(DType::kF4E2M1, values.data(), packed.data(), 5);
  EXPECT_EQ(packed[0], 0xF1);  // element 0 (0.5 = 0x1) low, element 1 (-6 = 0xF) high
  std::vector<float> back(5);
  ConvertToF32(DType::kF4E2M1, packed.data(), back.data(), 5);
  EXPECT_EQ(back, values);
  for (int code = 0; code < 16; ++code) {
    const float v = F4E2M1ToF32(static_cast<std::uint8_t>(code));
    if (code == 0x8) {
      EXPECT_EQ(F32ToF4E2M1(v), 0x8);  // -0
    } else {
      EXPECT_EQ(F32ToF4E2M1(v), code);
    }
  }
}

TEST(DType, SafetensorsNames) {
  DType d;
  EXPECT_TRUE(ParseSafetensorsDType("F8_E4M3", &d));
  EXPECT_EQ(d, DType::kF8E4M3);
  EXPECT_TRUE(ParseSafetensorsDType("BF16", &d));
  EXPECT_EQ(d, DType::kBF16);
  EXPECT_FALSE(ParseSafetensorsDType("F7", &d));
}

}  // namespace
}  // namespace fission
