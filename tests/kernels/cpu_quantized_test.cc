// The CPU products on per-channel FP8, MXFP8, MXFP4 and DeepSeek-V4's FP4 (Mxfp4A8) weights
// (cpu_quantized.cc, and the routed experts in cpu_moe.cc) against a double-precision evaluation of
// their definition: the weight decoded exactly, each activation row quantized by the format's rule,
// products summed.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "tensor/quantize.h"

namespace fission::kernels::cpu {
namespace {

const WeightFormat kFormats[] = {WeightFormat::Fp8PerChannel(), WeightFormat::Mxfp8(), WeightFormat::Mxfp4(),
                                 WeightFormat::Mxfp4A8()};

std::vector<float> Normal(std::int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A quantized weight kept with its own decoded values.
struct Quantized {
  QuantizedMatrix q;
  WeightFormat format;
  std::vector<float> decoded;
  Quantized(const std::vector<float>& w, std::int64_t m, std::int64_t k, WeightFormat f)
      : q(QuantizeMatrix(w.data(), m, k, f)), format(f), decoded(w.size()) {
    DequantizeMatrix(view(), decoded.data());
  }
  WeightView view() const { return {q.codes, q.scales, format}; }
};

// y[n, m] = quantized(x) · decoded(w)ᵀ in double.
std::vector<double> Reference(const std::vector<float>& x, std::int64_t n, const Quantized& w, std::int64_t m,
                              std::int64_t k) {
  std::vector<double> y(n * m);
  std::vector<float> xq(k);
  for (std::int64_t i = 0; i < n; ++i) {
    QuantizeActivations(w.format, x.data() + i * k, k, xq.data());
    for (std::int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (std::int64_t c = 0; c < k; ++c) acc += static_cast<double>(xq[c]) * w.decoded[j * k + c];
      y[i * m + j] = acc;
    }
  }
  return y;
}

TEST(CpuQuantized, LinearMatchesTheDefinitionOnOddShapes) {
  std::mt19937 rng(5);
  auto backend = MakeCpuBackend();
  for (const WeightFormat& f : kFormats) {
    for (auto [n, m, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{3, 7, 45}, {5, 16, 96}, {1, 3, 33}}) {
      const std::vector<float> x = Normal(n * k, rng), w = Normal(m * k, rng);
      const Quantized qw(w, m, k, f);
      Buffer xb = MakeF32Buffer(Shape{n, k}, x), out(DType::kF32, Shape{n, m});
      backend->Linear(xb, qw.view(), out);
      const std::vector<double> want = Reference(x, n, qw, m, k);
      for (std::int64_t i = 0; i < n * m; ++i)
        EXPECT_NEAR(out.ptr<float>()[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << f.Name() << " " << i;
    }
  }
}

TEST(CpuQuantized, ActivationsAreQuantizedNotPassedThrough) {
  // The same weight as plain fp32 (its decoded values) gives a different product: the activation
  // rule is applied. (A test that cannot tell the two paths apart would pass either way.)
  std::mt19937 rng(9);
  auto backend = MakeCpuBackend();
  for (const WeightFormat& f : kFormats) {
    const std::vector<float> x = Normal(2 * 64, rng), w = Normal(8 * 64, rng);
    const Quantized qw(w, 8, 64, f);
    Buffer xb = MakeF32Buffer(Shape{2, 64}, x), a(DType::kF32, Shape{2, 8}), b(DType::kF32, Shape{2, 8});
    Buffer plain = MakeF32Buffer(Shape{8, 64}, qw.decoded);
    backend->Linear(xb, qw.view(), a);
    backend->Linear(xb, plain.tensor(), b);
    double diff = 0;
    for (int i = 0; i < 16; ++i) diff = std::max(diff, std::fabs(static_cast<double>(a.ptr<float>()[i]) - b.ptr<float>()[i]));
    EXPECT_GT(diff, 1e-4) << f.Name();
  }
}

TEST(CpuQuantized, RoutedExpertsMatchTheDefinition) {
  std::mt19937 rng(11);
  auto backend = MakeCpuBackend();
  const std::int64_t n = 5, hidden = 40, inter = 24, experts = 3, top_k = 2;
  for (const WeightFormat& f : kFormats) {
    std::vector<Quantized> gate_up, down;
    std::vector<WeightView> gu_views, dn_views;
    for (int e = 0; e < experts; ++e) {
      gate_up.emplace_back(Normal(2 * inter * hidden, rng), 2 * inter, hidden, f);
      down.emplace_back(Normal(hidden * inter, rng), hidden, inter, f);
    }
    for (int e = 0; e < experts; ++e) {
      gu_views.push_back(gate_up[e].view());
      dn_views.push_back(down[e].view());
    }
    const std::vector<float> x = Normal(n * hidden, rng);
    std::vector<std::int32_t> ids = {0, 1, 2, 0, 1, 2, 0, 2, 1, 0};
    std::vector<float> weights = {0.5f, 0.25f, 1.0f, 0.75f, 0.3f, 0.2f, 0.6f, 0.4f, 0.9f, 0.1f};
    Buffer xb = MakeF32Buffer(Shape{n, hidden}, x), out(DType::kF32, Shape{n, hidden});
    Buffer idb(DType::kI32, Shape{n, top_k}), wb = MakeF32Buffer(Shape{n, top_k}, weights);
    std::copy(ids.begin(), ids.end(), idb.ptr<std::int32_t>());
    backend->MoeExperts(xb, idb, wb, gu_views, dn_views, out);
    for (std::int64_t t = 0; t < n; ++t) {
      std::vector<double> want(hidden, 0.0);
      for (std::int64_t k = 0; k < top_k; ++k) {
        const int e = ids[t * top_k + k];
        const std::vector<float> row(x.begin() + t * hidden, x.begin() + (t + 1) * hidden);
        const std::vector<double> gu = Reference(row, 1, gate_up[e], 2 * inter, hidden);
        std::vector<float> act(inter);
        for (std::int64_t j = 0; j < inter; ++j) {
          const double g = gu[j];
          act[j] = static_cast<float>(g / (1 + std::exp(-g)) * gu[inter + j]);
        }
        const std::vector<double> y = Reference(act, 1, down[e], hidden, inter);
        for (std::int64_t j = 0; j < hidden; ++j) want[j] += weights[t * top_k + k] * y[j];
      }
      // Looser than Linear: the second quantization sees fp32 against double activations, which
      // can move an element across a rounding boundary of a coarse (e2m1) grid.
      const double tol = f == WeightFormat::Mxfp4() ? 0.05 : 1e-3;
      for (std::int64_t j = 0; j < hidden; ++j)
        EXPECT_NEAR(out.ptr<float>()[t * hidden + j], want[j], tol * (1 + std::fabs(want[j]))) << f.Name() << " " << t;
    }
  }
}

}  // namespace
}  // namespace fission::kernels::cpu
