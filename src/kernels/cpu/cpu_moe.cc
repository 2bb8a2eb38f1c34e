// DeepSeekMoE routing and routed experts on the CPU.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tensor/quantize.h"

namespace fission::kernels::cpu {
// Indices of the k largest values, larger first; ties keep the lower index first.
std::vector<std::int32_t> TopK(const std::vector<float>& values, std::int64_t k) {
  std::vector<std::int32_t> idx(values.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](std::int32_t a, std::int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
  idx.resize(k);
  return idx;
}

void MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& r, const Tensor& topk_ids,
              const Tensor& topk_weights) {
  const std::int64_t n = router_logits.shape[0], experts = r.num_experts;
  const std::int64_t per_group = experts / r.n_group, columns = r.top_k + r.shared_experts;
  FISSION_CHECK(router_logits.shape[1] == experts && bias.numel() == experts && r.shared_experts >= 0 &&
                topk_ids.numel() == n * columns && topk_weights.numel() == n * columns);
  const float* b = bias.ptr<float>();
  std::vector<float> scores(experts), choice(experts), group_scores(r.n_group);
  for (std::int64_t t = 0; t < n; ++t) {
    const float* logits = router_logits.ptr<float>() + t * experts;
    for (std::int64_t e = 0; e < experts; ++e) {
      scores[e] = 1.0f / (1.0f + std::exp(-logits[e]));
      choice[e] = scores[e] + b[e];  // the correction bias steers selection only
    }
    // A group's score is the sum of its two best experts.
    for (std::int64_t g = 0; g < r.n_group; ++g) {
      float best = -INFINITY, second = -INFINITY;
      for (std::int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
        if (choice[e] > best) {
          second = best;
          best = choice[e];
        } else if (choice[e] > second) {
          second = choice[e];
        }
      }
      group_scores[g] = per_group >= 2 ? best + second : best;
    }
    std::vector<std::int32_t> groups = TopK(group_scores, r.topk_group);
    std::vector<float> masked(experts, 0.0f);  // experts outside the chosen groups score 0, as the reference does
    for (std::int32_t g : groups)
      for (std::int64_t e = g * per_group; e < (g + 1) * per_group; ++e) masked[e] = choice[e];
    std::vector<std::int32_t> chosen = TopK(masked, r.top_k);
    std::sort(chosen.begin(), chosen.end());  // a fixed order for the weighted sum
    float sum = 0.0f;
    for (std::int32_t e : chosen) sum += scores[e];
    std::int32_t* ids = topk_ids.ptr<std::int32_t>() + t * columns;
    float* weights = topk_weights.ptr<float>() + t * columns;
    for (std::int64_t k = 0; k < r.top_k; ++k) {
      float w = scores[chosen[k]];
      if (r.norm_topk_prob) w = w / (sum + 1e-20f);
      ids[k] = chosen[k];
      weights[k] = w * r.routed_scaling_factor;
    }
    for (std::int64_t s = 0; s < r.shared_experts; ++s) {
      ids[r.top_k + s] = static_cast<std::int32_t>(experts + s);
      weights[r.top_k + s] = 1.0f;
    }
  }
}

namespace {

// out[t] = Σ_k weights[t,k] · expert_e(x[t]). `expert(e, xin, y)` runs expert e over its rows.
// Each expert's output for each of its (token, k) pairs is kept apart, so the final sum per token
// runs over k in a fixed order whatever else is in the batch.
template <typename Expert>
void RunExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights, std::int64_t experts,
                const Expert& expert, const Tensor& out) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1], top_k = topk_ids.shape[1];
  // Tokens per expert, in token order.
  std::vector<std::vector<std::int32_t>> tokens(experts), slots(experts);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t k = 0; k < top_k; ++k) {
      const std::int32_t e = topk_ids.ptr<std::int32_t>()[t * top_k + k];
      FISSION_CHECK(e >= 0 && e < experts, "expert id ", e);
      tokens[e].push_back(static_cast<std::int32_t>(t));
      slots[e].push_back(static_cast<std::int32_t>(t * top_k + k));
    }
  std::vector<float> expert_out(static_cast<std::size_t>(n * top_k * hidden), 0.0f);
  for (std::int64_t e = 0; e < experts; ++e) {
    const std::int64_t m = static_cast<std::int64_t>(tokens[e].size());
    if (m == 0) continue;
    Buffer xin(DType::kF32, Shape{m, hidden}), y(DType::kF32, Shape{m, hidden});
    GatherRows(x, tokens[e], xin);
    expert(e, xin.tensor(), y.tensor());
    for (std::int64_t i = 0; i < m; ++i) {
      const std::int32_t slot = slots[e][i];
      const float w = topk_weights.ptr<float>()[slot];
      float* dst = expert_out.data() + static_cast<std::int64_t>(slot) * hidden;
      const float* src = y.ptr<float>() + i * hidden;
      for (std::int64_t j = 0; j < hidden; ++j) dst[j] = src[j] * w;
    }
  }
  for (std::int64_t t = 0; t < n; ++t) {
    float* o = out.ptr<float>() + t * hidden;
    for (std::int64_t j = 0; j < hidden; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < top_k; ++k) acc += expert_out[(t * top_k + k) * hidden + j];
      o[j] = acc;
    }
  }
}

}  // namespace

void MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit, const Tensor& out) {
  const WeightFormat format = CommonFormat(gate_up, down, "MoeExperts");
  // The quantized formats quantize each expert's rows per token, as a device computing one expert
  // at a time would.
  auto linear = [&](const Tensor& in, const WeightView& w, const Tensor& y) {
    if (!format.quantized()) return Linear(in, w.values, y);
    if (format == WeightFormat::Fp8Block128()) return LinearFp8(in, w.values, w.scales, y);
    if (IsBlockQuantizedFormat(format)) return LinearQuantized(in, w, y);
    Fail("MoeExperts: the CPU backend has no kernel for experts of format ", format.Name());
  };
  auto expert = [&](std::int64_t e, const Tensor& xin, const Tensor& y) {
    const std::int64_t m = xin.shape[0], inter = down[e].cols();
    Buffer gu(DType::kF32, Shape{m, 2 * inter}), act(DType::kF32, Shape{m, inter});
    linear(xin, gate_up[e], gu);
    SiluMul(gu, act, limit);
    linear(act, down[e], y);
  };
  RunExperts(x, topk_ids, topk_weights, static_cast<std::int64_t>(gate_up.size()), expert, out);
}

}  // namespace fission::kernels::cpu
