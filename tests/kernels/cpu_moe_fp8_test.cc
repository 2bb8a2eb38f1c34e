// The CPU FP8 routed experts (cpu_moe.cc's MoeExperts on Fp8Block128 weights) against a double-precision evaluation of
// the same formula: each expert's inputs quantized per token and 128-group, products of the
// dequantized operands, silu(gate)·up, quantized again, the down product, weighted sum over k.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/host_view_testlib.h"

namespace fission::kernels::cpu {
namespace {

using testing::View;

// An e4m3 matrix [m, k] (no NaN codes) with random block scales.
struct Fp8Matrix {
  std::int64_t m = 0, k = 0;
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
  Fp8Matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng) : m(rows), k(cols), codes(rows * cols) {
    for (auto& c : codes) {
      c = static_cast<std::uint8_t>(rng());
      if ((c & 0x7F) == 0x7F) c = 0x7E;
    }
    std::uniform_real_distribution<float> u(2e-4f, 2e-3f);
    scales.resize(((m + 127) / 128) * ((k + 127) / 128));
    for (float& s : scales) s = u(rng);
  }
  double At(std::int64_t r, std::int64_t c) const {
    return static_cast<double>(F8E4M3ToF32(codes[r * k + c])) * scales[(r / 128) * ((k + 127) / 128) + c / 128];
  }
  Tensor Codes() { return View(codes.data(), DType::kF8E4M3, Shape{m, k}); }
  Tensor Scales() { return View(scales.data(), DType::kF32, Shape{(m + 127) / 128, (k + 127) / 128}); }
};

// x quantized and dequantized as the op does (per 128-group of the row).
std::vector<double> Dequantized(const std::vector<float>& x) {
  const std::int64_t k = static_cast<std::int64_t>(x.size());
  std::vector<std::uint8_t> codes(k);
  std::vector<float> scales((k + 127) / 128);
  QuantizeFp8PerTokenGroup(x.data(), k, codes.data(), scales.data());
  std::vector<double> out(k);
  for (std::int64_t i = 0; i < k; ++i) out[i] = static_cast<double>(F8E4M3ToF32(codes[i])) * scales[i / 128];
  return out;
}

// y = W x for a dequantized x.
std::vector<double> Product(const Fp8Matrix& w, const std::vector<double>& x) {
  std::vector<double> y(w.m, 0.0);
  for (std::int64_t r = 0; r < w.m; ++r)
    for (std::int64_t c = 0; c < w.k; ++c) y[r] += w.At(r, c) * x[c];
  return y;
}

TEST(CpuMoeFp8, EqualsDoubleProductOfDequantizedOperands) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> weight(0.1f, 1.0f);
  // (tokens, experts, top_k, hidden, intermediate): whole blocks; a partial group in k and partial
  // blocks in m; a single token.
  for (auto [n, experts, top_k, hidden, inter] :
       {std::tuple{9, 6, 2, 256, 128}, {13, 5, 3, 320, 200}, {1, 4, 2, 384, 128}}) {
    std::vector<Fp8Matrix> gate_up, down;
    std::vector<Tensor> gu_t, gus_t, down_t, downs_t;
    for (int e = 0; e < experts; ++e) {
      gate_up.emplace_back(2 * inter, hidden, rng);
      down.emplace_back(hidden, inter, rng);
    }
    for (int e = 0; e < experts; ++e) {
      gu_t.push_back(gate_up[e].Codes());
      gus_t.push_back(gate_up[e].Scales());
      down_t.push_back(down[e].Codes());
      downs_t.push_back(down[e].Scales());
    }
    std::vector<float> x(n * hidden), w(n * top_k), out(n * hidden, NAN);
    for (float& v : x) v = normal(rng);
    for (float& v : w) v = weight(rng);
    // Distinct experts per token drawn from all but the last (which gets no tokens): ragged loads.
    std::vector<std::int32_t> ids(n * top_k);
    for (int t = 0; t < n; ++t) {
      std::vector<std::int32_t> pool(experts - 1);
      for (int e = 0; e < experts - 1; ++e) pool[e] = e;
      std::shuffle(pool.begin(), pool.end(), rng);
      std::sort(pool.begin(), pool.begin() + top_k);
      std::copy(pool.begin(), pool.begin() + top_k, ids.begin() + t * top_k);
    }
    std::vector<WeightView> gu_w, down_w;
    for (int e = 0; e < experts; ++e) {
      gu_w.emplace_back(gu_t[e], gus_t[e], WeightFormat::Fp8Block128());
      down_w.emplace_back(down_t[e], downs_t[e], WeightFormat::Fp8Block128());
    }
    MoeExperts(View(x.data(), DType::kF32, Shape{n, hidden}), View(ids.data(), DType::kI32, Shape{n, top_k}),
               View(w.data(), DType::kF32, Shape{n, top_k}), gu_w, down_w, /*limit=*/0.0f,
               View(out.data(), DType::kF32, Shape{n, hidden}));
    double num = 0, den = 0;
    for (int t = 0; t < n; ++t) {
      const std::vector<double> xq = Dequantized({x.begin() + t * hidden, x.begin() + (t + 1) * hidden});
      std::vector<double> ref(hidden, 0.0);
      for (int k = 0; k < top_k; ++k) {
        const int e = ids[t * top_k + k];
        const std::vector<double> gu = Product(gate_up[e], xq);
        std::vector<float> act(inter);
        for (int i = 0; i < inter; ++i) act[i] = static_cast<float>(gu[i] / (1.0 + std::exp(-gu[i])) * gu[inter + i]);
        const std::vector<double> y = Product(down[e], Dequantized(act));
        for (int j = 0; j < hidden; ++j) ref[j] += w[t * top_k + k] * y[j];
      }
      for (int j = 0; j < hidden; ++j) {
        ASSERT_FALSE(std::isnan(out[t * hidden + j])) << "token " << t << " column " << j;
        num += (out[t * hidden + j] - ref[j]) * (out[t * hidden + j] - ref[j]);
        den += ref[j] * ref[j];
      }
    }
    // fp32 sums against double: about 1e-6. The bound leaves room for an intermediate value that
    // fp32 and double round to neighbouring e4m3 codes (one code step of one element); skipping
    // the activation quantization, or quantizing per tensor, gives errors of a few percent.
    std::printf("%d tokens, %d experts, %lldx%lld: relative error %.3g\n", n, experts, static_cast<long long>(hidden),
                static_cast<long long>(inter), std::sqrt(num / den));
    EXPECT_LT(std::sqrt(num / den), 2e-3) << n << " tokens, " << experts << " experts, " << hidden << "x" << inter;
  }
}

}  // namespace
}  // namespace fission::kernels::cpu
