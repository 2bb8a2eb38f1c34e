// Block quantization (tensor/quantize.h) against a reference written here from the formats'
// definitions: element values enumerated from their bit layouts, rounding by nearest search (ties
// to the even code), scales from amax by the OCP MX rule or amax / 448.
#include "tensor/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace fission {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Every finite non-negative value of the element type, indexed by its code.
std::vector<double> ElementValues(DType dtype) {
  std::vector<double> values;
  if (dtype == DType::kF4E2M1) return {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int code = 0; code < 0x7F; ++code) {  // 0x7F is NaN
    const int exp = code >> 3, man = code & 7;
    values.push_back(exp == 0 ? man / 8.0 * std::ldexp(1.0, -6) : (1 + man / 8.0) * std::ldexp(1.0, exp - 7));
  }
  return values;
}

// Nearest representable value of |v| (ties to the even code), saturating at the largest.
double RoundToElement(DType dtype, double v) {
  const std::vector<double> values = ElementValues(dtype);
  const double a = std::fabs(v);
  std::size_t best = 0;
  for (std::size_t c = 1; c < values.size(); ++c) {
    const double d = std::fabs(values[c] - a), b = std::fabs(values[best] - a);
    if (d < b || (d == b && c % 2 == 0)) best = c;
  }
  return std::copysign(values[best], v);
}

int Emax(DType dtype) { return dtype == DType::kF4E2M1 ? 2 : 8; }

// The reference decoded matrix of `format` for `w` [rows, cols].
std::vector<float> ReferenceRoundTrip(const std::vector<float>& w, std::int64_t rows, std::int64_t cols,
                                      const WeightFormat& format) {
  std::vector<float> out(w.size());
  const std::int64_t br = format.block_rows, bc = std::min<std::int64_t>(format.block_cols, cols);
  for (std::int64_t r0 = 0; r0 < rows; r0 += br) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += bc) {
      const std::int64_t r1 = std::min(rows, r0 + br), c1 = std::min(cols, c0 + bc);
      double amax = 0;
      bool nan = false;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
          const float v = w[r * cols + c];
          if (std::isnan(v)) nan = true;
          if (std::isfinite(v)) amax = std::max(amax, std::fabs(static_cast<double>(v)));
        }
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) {
          const float v = w[r * cols + c];
          float& o = out[r * cols + c];
          if (format.scales == DType::kE8M0) {
            if (nan) {
              o = kNaN;
              continue;
            }
            const int shared = amax == 0 ? -127 : std::clamp(static_cast<int>(std::floor(std::log2(amax))) - Emax(format.values), -127, 127);
            o = static_cast<float>(RoundToElement(format.values, std::ldexp(static_cast<double>(v), -shared)) *
                                   std::ldexp(1.0, shared));
          } else {
            const float scale = amax == 0 ? 1.0f : static_cast<float>(amax) / 448.0f;
            o = std::isnan(v) ? kNaN : static_cast<float>(RoundToElement(format.values, v / scale)) * scale;
          }
        }
    }
  }
  return out;
}

std::vector<float> RoundTrip(const std::vector<float>& w, std::int64_t rows, std::int64_t cols, const WeightFormat& f) {
  const QuantizedMatrix q = QuantizeMatrix(w.data(), rows, cols, f);
  std::vector<float> out(w.size());
  DequantizeMatrix(WeightView(q.codes, q.scales, f), out.data());
  return out;
}

std::vector<float> Random(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng) * std::exp(normal(rng));  // several binades
  return v;
}

void ExpectSameValues(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i;
    } else {
      EXPECT_EQ(got[i], want[i]) << what << " element " << i;
    }
  }
}

const WeightFormat kFormats[] = {WeightFormat::Fp8Block128(), WeightFormat::Fp8PerChannel(), WeightFormat::Mxfp8(),
                                 WeightFormat::Mxfp4(), WeightFormat::Mxfp4A8()};

TEST(Quantize, MatchesTheReferenceOnOddShapesWithPartialLastBlocks) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{7, 45}, {3, 33}, {1, 1}, {130, 129}, {5, 64}};
  for (const WeightFormat& f : kFormats) {
    for (auto [rows, cols] : shapes) {
      const std::vector<float> w = Random(rows * cols, static_cast<std::uint64_t>(rows * 1000 + cols));
      ExpectSameValues(RoundTrip(w, rows, cols, f), ReferenceRoundTrip(w, rows, cols, f),
                       f.Name() + " " + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

TEST(Quantize, ScaleGridAndCodesHaveTheFormatsShapes) {
  const std::vector<float> w = Random(7 * 45, 1);
  const QuantizedMatrix mx = QuantizeMatrix(w.data(), 7, 45, WeightFormat::Mxfp4());
  EXPECT_EQ(mx.scales.tensor().shape, (Shape{7, 2}));
  EXPECT_EQ(mx.codes.tensor().bytes(), 158u);  // 315 nibbles, packed over the whole matrix
  WeightView(mx.codes, mx.scales, WeightFormat::Mxfp4()).Check("mxfp4");
  const QuantizedMatrix pc = QuantizeMatrix(w.data(), 7, 45, WeightFormat::Fp8PerChannel());
  EXPECT_EQ(pc.scales.tensor().shape, (Shape{7, 1}));
  const QuantizedMatrix blk = QuantizeMatrix(w.data(), 7, 45, WeightFormat::Fp8Block128());
  EXPECT_EQ(blk.scales.tensor().shape, (Shape{1, 1}));
}

TEST(Quantize, MxRoundTripIsIdempotent) {
  for (const WeightFormat& f : {WeightFormat::Mxfp8(), WeightFormat::Mxfp4()}) {
    const std::vector<float> w = Random(9 * 70, 7);
    const std::vector<float> once = RoundTrip(w, 9, 70, f);
    ExpectSameValues(RoundTrip(once, 9, 70, f), once, f.Name() + " twice");
  }
}

TEST(Quantize, Fp8RoundTripErrorIsWithinHalfAnE4m3Step) {
  for (const WeightFormat& f : {WeightFormat::Fp8Block128(), WeightFormat::Fp8PerChannel()}) {
    const std::vector<float> w = Random(6 * 50, 3);
    const std::vector<float> back = RoundTrip(w, 6, 50, f);
    for (std::size_t i = 0; i < w.size(); ++i) {
      float amax = 0;  // of the row (per channel) or of everything (one 128x128 block here)
      const std::size_t row = i / 50;
      for (std::size_t j = 0; j < w.size(); ++j)
        if (f == WeightFormat::Fp8Block128() || j / 50 == row) amax = std::max(amax, std::fabs(w[j]));
      const float subnormal_step = amax / 448.0f * std::ldexp(1.0f, -9);
      EXPECT_LE(std::fabs(back[i] - w[i]), std::fabs(w[i]) * 0.0625f + subnormal_step) << f.Name() << " " << i;
    }
  }
}

TEST(Quantize, SaturatesAboveTheElementsLargestValue) {
  // amax 7.9: X = 2^(2 - 2) = 1, 7.9 saturates to 6 in e2m1; amax 500: X = 2^(8 - 8), 500 -> 448.
  std::vector<float> fp4(32, 0.25f), fp8(32, 1.0f);
  fp4[0] = 7.9f;
  fp4[1] = -kInf;
  fp8[0] = 500.0f;
  fp8[1] = kInf;
  const std::vector<float> a = RoundTrip(fp4, 1, 32, WeightFormat::Mxfp4());
  EXPECT_EQ(a[0], 6.0f);
  EXPECT_EQ(a[1], -6.0f);  // infinities do not enter amax and saturate
  EXPECT_EQ(a[2], 0.0f);   // 0.25 is half of e2m1's smallest step at X = 1: ties to the even code 0
  const std::vector<float> b = RoundTrip(fp8, 1, 32, WeightFormat::Mxfp8());
  EXPECT_EQ(b[0], 448.0f);
  EXPECT_EQ(b[1], 448.0f);
  EXPECT_EQ(b[2], 1.0f);
  std::vector<float> pc = {2.0f, kInf, -1.0f};
  const std::vector<float> c = RoundTrip(pc, 1, 3, WeightFormat::Fp8PerChannel());
  EXPECT_EQ(c[0], 2.0f);  // amax 2 maps to 448
  EXPECT_EQ(c[1], 2.0f);  // +inf saturates to 448 * scale
}

TEST(Quantize, NanStaysNanAndOnlyInItsBlockForMxFormats) {
  std::vector<float> w(64, 1.0f);
  w[3] = kNaN;
  for (const WeightFormat& f : {WeightFormat::Mxfp8(), WeightFormat::Mxfp4()}) {
    const QuantizedMatrix q = QuantizeMatrix(w.data(), 1, 64, f);
    EXPECT_EQ(q.scales.ptr<std::uint8_t>()[0], 0xFF) << f.Name();
    EXPECT_EQ(q.scales.ptr<std::uint8_t>()[1], 127 - (f.values == DType::kF4E2M1 ? 2 : 8)) << f.Name();
    const std::vector<float> back = RoundTrip(w, 1, 64, f);
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(back[i])) << f.Name() << " " << i;
    for (int i = 32; i < 64; ++i) EXPECT_EQ(back[i], 1.0f) << f.Name() << " " << i;
  }
  for (const WeightFormat& f : {WeightFormat::Fp8Block128(), WeightFormat::Fp8PerChannel()}) {
    const std::vector<float> back = RoundTrip(w, 1, 64, f);
    EXPECT_TRUE(std::isnan(back[3])) << f.Name();
    EXPECT_EQ(back[4], 1.0f) << f.Name();
  }
}

TEST(Quantize, ZeroBlocksDecodeToZero) {
  const std::vector<float> w(40, 0.0f);
  for (const WeightFormat& f : kFormats) {
    const std::vector<float> back = RoundTrip(w, 1, 40, f);
    for (float v : back) EXPECT_EQ(v, 0.0f) << f.Name();
  }
  EXPECT_EQ(MxScaleCode(0.0f, 2), 0);
}

TEST(Quantize, MxScaleCodeIsFloorLog2MinusEmaxClamped) {
  EXPECT_EQ(MxScaleCode(1.0f, 2), 125);
  EXPECT_EQ(MxScaleCode(1.99f, 2), 125);
  EXPECT_EQ(MxScaleCode(2.0f, 2), 126);
  EXPECT_EQ(MxScaleCode(448.0f, 8), 127);
  EXPECT_EQ(MxScaleCode(std::ldexp(1.0f, -140), 2), 0);    // 2^(-140-2) clamps to 2^-127
  EXPECT_EQ(MxScaleCode(std::numeric_limits<float>::max(), 2), 252);  // 2^(127-2)
  EXPECT_EQ(MxScaleCode(kNaN, 2), 0xFF);
}

// The activation side: a row decoded after quantization by the format's rule.
// DeepSeek's power-of-two e4m3 block scale, in double: 2^ceil(log2(max(amax, 1e-4) / 448)).
double Ue8m0Scale(double amax) { return std::exp2(std::ceil(std::log2(std::max(amax, 1e-4) / 448.0))); }

std::vector<float> ReferenceActivations(const WeightFormat& f, const std::vector<float>& x) {
  const std::int64_t k = static_cast<std::int64_t>(x.size());
  if (f.e4m3_act_block > 0) {
    std::vector<float> out(x.size());
    for (std::int64_t g = 0; g < k; g += f.e4m3_act_block) {
      const std::int64_t end = std::min<std::int64_t>(k, g + f.e4m3_act_block);
      double amax = 0;
      for (std::int64_t i = g; i < end; ++i)
        if (std::isfinite(x[i])) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
      const double scale = Ue8m0Scale(amax);
      for (std::int64_t i = g; i < end; ++i)
        out[i] = static_cast<float>(RoundToElement(DType::kF8E4M3, x[i] / scale) * scale);
    }
    return out;
  }
  if (f.scales == DType::kE8M0) return ReferenceRoundTrip(x, 1, k, f);
  const std::int64_t group = f == WeightFormat::Fp8Block128() ? 128 : k;
  std::vector<float> out(x.size());
  for (std::int64_t g = 0; g < k; g += group) {
    double amax = 0;
    for (std::int64_t i = g; i < std::min(k, g + group); ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
    const float scale = std::max(static_cast<float>(amax), 1e-4f) / 448.0f;
    for (std::int64_t i = g; i < std::min(k, g + group); ++i)
      out[i] = static_cast<float>(RoundToElement(DType::kF8E4M3, x[i] / scale)) * scale;
  }
  return out;
}

TEST(Quantize, ActivationRulesMatchTheReference) {
  for (const WeightFormat& f : kFormats) {
    for (std::int64_t k : {45, 130, 1}) {
      const std::vector<float> x = Random(k, static_cast<std::uint64_t>(k));
      std::vector<float> got(x.size());
      QuantizeActivations(f, x.data(), k, got.data());
      ExpectSameValues(got, ReferenceActivations(f, x), f.Name() + " activations k=" + std::to_string(k));
    }
  }
}

// DeepSeek-V4's FP4 experts store what Mxfp4 stores; their activations take e4m3 per 1x128 with
// power-of-two scales: the smallest power of two at or above amax / 448 (448 itself keeps scale 1,
// just above it takes 2), NaN outside the amax and kept, an infinity saturated, a block of tiny
// values on the 1e-4 floor.
TEST(Quantize, Mxfp4A8HasMxfp4sCodesAndE4m3PowerOfTwoActivations) {
  const std::vector<float> w = Random(7 * 45, 3);
  const QuantizedMatrix a = QuantizeMatrix(w.data(), 7, 45, WeightFormat::Mxfp4());
  const QuantizedMatrix b = QuantizeMatrix(w.data(), 7, 45, WeightFormat::Mxfp4A8());
  ASSERT_EQ(a.codes.tensor().bytes(), b.codes.tensor().bytes());
  EXPECT_EQ(std::memcmp(a.codes.ptr<std::uint8_t>(), b.codes.ptr<std::uint8_t>(), a.codes.tensor().bytes()), 0);
  EXPECT_EQ(std::memcmp(a.scales.ptr<std::uint8_t>(), b.scales.ptr<std::uint8_t>(), a.scales.tensor().bytes()), 0);
  EXPECT_FALSE(WeightFormat::Mxfp4A8() == WeightFormat::Mxfp4());
  EXPECT_EQ(WeightFormat::Mxfp4A8().Name(), "F4 1x32 F8_E8M0 scales, e4m3 1x128 activations");
  EXPECT_EQ(ActivationRuleName(WeightFormat::Mxfp4A8()), "e4m3 per 1x128, ue8m0 scales");
  const auto quantize = [](std::vector<float> x) {
    QuantizeActivations(WeightFormat::Mxfp4A8(), x.data(), static_cast<std::int64_t>(x.size()), x.data());
    return x;
  };
  EXPECT_EQ(quantize({448.0f, 1.0f, -3.3f}), (std::vector<float>{448.0f, 1.0f, -3.25f}));
  EXPECT_EQ(quantize({449.0f, 1.0f}), (std::vector<float>{448.0f, 1.0f}));  // scale 2: 224.5 -> 224
  const std::vector<float> special = quantize({kNaN, kInf, 2.0f});
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_EQ(special[1], 3.5f);  // scale 2^-7 from the finite 2.0: 448 · 2^-7
  EXPECT_EQ(special[2], 2.0f);
  EXPECT_EQ(quantize({1e-30f}), std::vector<float>{0.0f});
  EXPECT_EQ(Ue8m0Exponent(448.0f), 0);
  EXPECT_EQ(Ue8m0Exponent(449.0f), 1);
  EXPECT_EQ(Ue8m0Exponent(0.0f), static_cast<int>(std::ceil(std::log2(1e-4 / 448.0))));
}

TEST(Quantize, RefusesFormatsItDoesNotKnow) {
  const std::vector<float> w(4, 1.0f);
  const WeightFormat odd{DType::kF8E5M2, DType::kF32, 1, 32};
  EXPECT_THROW(QuantizeMatrix(w.data(), 1, 4, odd), Error);
  EXPECT_EQ(WeightFormat::Fp8PerChannel().Name(), "F8_E4M3 1xrow F32 scales");
}

}  // namespace
}  // namespace fission
