// The CPU FP8 reference (cpu_fp8.cc): the quantizer's codes and scales, and LinearFp8 against a
// double-precision product of the dequantized operands.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/host_view_testlib.h"

namespace fission::kernels::cpu {
namespace {

using testing::View;

TEST(CpuFp8, QuantizerScalesGroupMaxToE4M3Max) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const std::int64_t k = 300;  // two whole groups and a partial one
  std::vector<float> x(k);
  for (float& v : x) v = normal(rng);
  std::vector<std::uint8_t> codes(k);
  std::vector<float> scales(3);
  QuantizeFp8PerTokenGroup(x.data(), k, codes.data(), scales.data());
  for (int g = 0; g < 3; ++g) {
    float amax = 0.0f;
    for (std::int64_t i = g * 128; i < std::min<std::int64_t>(k, (g + 1) * 128); ++i)
      amax = std::max(amax, std::fabs(x[i]));
    EXPECT_FLOAT_EQ(scales[g], amax / 448.0f) << "group " << g;
    for (std::int64_t i = g * 128; i < std::min<std::int64_t>(k, (g + 1) * 128); ++i) {
      const float back = F8E4M3ToF32(codes[i]) * scales[g];
      // e4m3 keeps 3 mantissa bits: a relative step of 2^-3, half of it after rounding (plus the
      // subnormal step near zero).
      EXPECT_LE(std::fabs(back - x[i]), std::fabs(x[i]) / 16.0f + scales[g] * std::ldexp(1.0f, -9)) << i;
    }
  }
  // An all-zero group takes the floor scale, not a division by zero.
  std::vector<float> zeros(128, 0.0f);
  std::vector<std::uint8_t> zc(128);
  float zs = 0.0f;
  QuantizeFp8PerTokenGroup(zeros.data(), 128, zc.data(), &zs);
  EXPECT_FLOAT_EQ(zs, 1e-4f / 448.0f);
  for (std::uint8_t c : zc) EXPECT_EQ(F8E4M3ToF32(c), 0.0f);
}

TEST(CpuFp8, LinearEqualsProductOfDequantizedOperands) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(1e-4f, 2e-3f);
  for (auto [n, m, k] : {std::tuple{1, 200, 320}, {7, 256, 384}, {3, 130, 1000}}) {
    const std::int64_t mb = (m + 127) / 128, kb = (k + 127) / 128;
    std::vector<float> x(n * k), ws(mb * kb), out(n * m);
    for (float& v : x) v = normal(rng);
    for (float& v : ws) v = uniform(rng);
    std::vector<std::uint8_t> w(m * k);
    for (auto& c : w) {
      c = static_cast<std::uint8_t>(rng());
      if ((c & 0x7F) == 0x7F) c = 0x7E;  // no NaN codes
    }
    LinearFp8(View(x.data(), DType::kF32, Shape{n, k}), View(w.data(), DType::kF8E4M3, Shape{m, k}),
              View(ws.data(), DType::kF32, Shape{mb, kb}), View(out.data(), DType::kF32, Shape{n, m}));
    double num = 0, den = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      std::vector<std::uint8_t> codes(k);
      std::vector<float> xs(kb);
      QuantizeFp8PerTokenGroup(x.data() + i * k, k, codes.data(), xs.data());
      for (std::int64_t j = 0; j < m; ++j) {
        double ref = 0;
        for (std::int64_t c = 0; c < k; ++c)
          ref += static_cast<double>(F8E4M3ToF32(codes[c])) * xs[c / 128] * F8E4M3ToF32(w[j * k + c]) *
                 ws[(j / 128) * kb + c / 128];
        num += (out[i * m + j] - ref) * (out[i * m + j] - ref);
        den += ref * ref;
      }
    }
    EXPECT_LT(std::sqrt(num / den), 2e-6) << n << "x" << m << "x" << k;
  }
}

}  // namespace
}  // namespace fission::kernels::cpu
