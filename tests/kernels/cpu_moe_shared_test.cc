// Shared experts run as routed ones (MoeRouting::shared_experts, model/layers/feed_forward.cc): the
// routing appends them after the routed choices, and the shared MLP equals the sum of its pieces'
// MLPs taken as experts of weight 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/host_view_testlib.h"

namespace fission::kernels::cpu {
namespace {

using testing::View;

std::vector<float> Random(std::size_t n, std::mt19937& rng, float bound) {
  std::uniform_real_distribution<float> u(-bound, bound);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

TEST(CpuMoeShared, RoutingAppendsSharedExpertsAfterTheSameRoutedChoices) {
  std::mt19937 rng(3);
  const std::int64_t n = 9, experts = 16, top_k = 4, shared = 2;
  std::vector<float> logits = Random(n * experts, rng, 3.0f), bias = Random(experts, rng, 0.1f);
  MoeRouting plain{experts, top_k, 4, 2, true, 2.5f};
  MoeRouting with_shared = plain;
  with_shared.shared_experts = shared;
  std::vector<std::int32_t> ids(n * top_k), ids_s(n * (top_k + shared));
  std::vector<float> w(n * top_k), w_s(n * (top_k + shared));
  const Tensor l = View(logits.data(), DType::kF32, Shape{n, experts}), b = View(bias.data(), DType::kF32, Shape{experts});
  MoeRoute(l, b, plain, View(ids.data(), DType::kI32, Shape{n, top_k}), View(w.data(), DType::kF32, Shape{n, top_k}));
  MoeRoute(l, b, with_shared, View(ids_s.data(), DType::kI32, Shape{n, top_k + shared}),
           View(w_s.data(), DType::kF32, Shape{n, top_k + shared}));
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t k = 0; k < top_k; ++k) {
      EXPECT_EQ(ids_s[t * (top_k + shared) + k], ids[t * top_k + k]) << "token " << t << ", column " << k;
      EXPECT_EQ(w_s[t * (top_k + shared) + k], w[t * top_k + k]) << "token " << t << ", column " << k;
    }
    for (std::int64_t s = 0; s < shared; ++s) {
      EXPECT_EQ(ids_s[t * (top_k + shared) + top_k + s], experts + s) << "token " << t;
      EXPECT_EQ(w_s[t * (top_k + shared) + top_k + s], 1.0f) << "token " << t;
    }
  }
}

TEST(CpuMoeShared, RoutingRefusesOutputsWithoutTheSharedColumns) {
  std::vector<float> logits(16, 0.5f), bias(16, 0.0f), w(4);
  std::vector<std::int32_t> ids(4);
  MoeRouting r{16, 4, 1, 1, true, 1.0f};
  r.shared_experts = 1;
  EXPECT_DEATH(MoeRoute(View(logits.data(), DType::kF32, Shape{1, 16}), View(bias.data(), DType::kF32, Shape{16}), r,
                        View(ids.data(), DType::kI32, Shape{1, 4}), View(w.data(), DType::kF32, Shape{1, 4})),
               "");
}

// Two pieces of a shared MLP of 2 × 24 units as experts 3 and 4 of weight 1, beside three routed
// experts, against the routed experts plus the whole MLP.
TEST(CpuMoeShared, PiecesAsExpertsSumToTheSharedMlp) {
  std::mt19937 rng(4);
  const std::int64_t n = 5, hidden = 32, inter = 24, routed = 3, pieces = 2, top_k = 2;
  std::vector<std::vector<float>> gate_up(routed + pieces), down(routed + pieces);
  for (std::int64_t e = 0; e < routed; ++e) {
    gate_up[e] = Random(2 * inter * hidden, rng, 0.2f);
    down[e] = Random(hidden * inter, rng, 0.2f);
  }
  // The shared MLP: gate [2I, H] over up [2I, H]; down [H, 2I].
  const std::int64_t shared_inter = pieces * inter;
  std::vector<float> s_gate = Random(shared_inter * hidden, rng, 0.2f), s_up = Random(shared_inter * hidden, rng, 0.2f),
                     s_down = Random(hidden * shared_inter, rng, 0.2f);
  for (std::int64_t p = 0; p < pieces; ++p) {
    auto& gu = gate_up[routed + p];
    gu.assign(s_gate.begin() + p * inter * hidden, s_gate.begin() + (p + 1) * inter * hidden);
    gu.insert(gu.end(), s_up.begin() + p * inter * hidden, s_up.begin() + (p + 1) * inter * hidden);
    auto& d = down[routed + p];
    for (std::int64_t r = 0; r < hidden; ++r)
      d.insert(d.end(), s_down.begin() + r * shared_inter + p * inter, s_down.begin() + r * shared_inter + (p + 1) * inter);
  }
  std::vector<WeightView> gu_views, down_views;
  for (std::int64_t e = 0; e < routed + pieces; ++e) {
    gu_views.emplace_back(View(gate_up[e].data(), DType::kF32, Shape{2 * inter, hidden}));
    down_views.emplace_back(View(down[e].data(), DType::kF32, Shape{hidden, inter}));
  }
  std::vector<float> x = Random(n * hidden, rng, 1.0f);
  std::vector<std::int32_t> ids, routed_ids;
  std::vector<float> weights, routed_weights;
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int32_t a = static_cast<std::int32_t>(t % routed), b = static_cast<std::int32_t>((t + 1) % routed);
    const float wa = 0.25f + 0.1f * static_cast<float>(t), wb = 0.5f;
    for (auto [e, w] : {std::pair{std::min(a, b), wa}, std::pair{std::max(a, b), wb}}) {
      ids.push_back(e);
      routed_ids.push_back(e);
      weights.push_back(w);
      routed_weights.push_back(w);
    }
    for (std::int32_t p = 0; p < pieces; ++p) {
      ids.push_back(static_cast<std::int32_t>(routed) + p);
      weights.push_back(1.0f);
    }
  }
  const std::int64_t columns = top_k + pieces;
  std::vector<float> fused(n * hidden), expected(n * hidden), shared_out(n * hidden);
  const Tensor xt = View(x.data(), DType::kF32, Shape{n, hidden});
  MoeExperts(xt, View(ids.data(), DType::kI32, Shape{n, columns}), View(weights.data(), DType::kF32, Shape{n, columns}),
             gu_views, down_views, 0.0f, View(fused.data(), DType::kF32, Shape{n, hidden}));
  MoeExperts(xt, View(routed_ids.data(), DType::kI32, Shape{n, top_k}),
             View(routed_weights.data(), DType::kF32, Shape{n, top_k}),
             std::span<const WeightView>(gu_views).first(routed), std::span<const WeightView>(down_views).first(routed),
             0.0f, View(expected.data(), DType::kF32, Shape{n, hidden}));
  std::vector<float> s_gate_up = s_gate, gu(n * 2 * shared_inter), act(n * shared_inter);
  s_gate_up.insert(s_gate_up.end(), s_up.begin(), s_up.end());
  Linear(xt, View(s_gate_up.data(), DType::kF32, Shape{2 * shared_inter, hidden}),
         View(gu.data(), DType::kF32, Shape{n, 2 * shared_inter}));
  SiluMul(View(gu.data(), DType::kF32, Shape{n, 2 * shared_inter}), View(act.data(), DType::kF32, Shape{n, shared_inter}));
  Linear(View(act.data(), DType::kF32, Shape{n, shared_inter}), View(s_down.data(), DType::kF32, Shape{hidden, shared_inter}),
         View(shared_out.data(), DType::kF32, Shape{n, hidden}));
  double err = 0.0, norm = 0.0;
  for (std::int64_t i = 0; i < n * hidden; ++i) {
    const double want = static_cast<double>(expected[i]) + shared_out[i];
    err += (fused[i] - want) * (fused[i] - want);
    norm += want * want;
  }
  EXPECT_LT(std::sqrt(err / norm), 1e-6);
}

}  // namespace
}  // namespace fission::kernels::cpu
