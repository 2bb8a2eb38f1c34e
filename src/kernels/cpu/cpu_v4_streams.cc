// DeepSeek-V4 on the CPU: the mHC residual streams, V4's rope, the grouped output projection and
// the MoE routing and activation (kernels/v4_ops.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_v4.h"

namespace fission::kernels::cpu {
namespace {

float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The flattened streams of one token, RMS-normalised without a weight.
void NormalizedFlat(const float* flat, std::int64_t width, float eps, std::vector<float>& out) {
  float sum = 0.0f;
  for (std::int64_t i = 0; i < width; ++i) sum += flat[i] * flat[i];
  const float r = 1.0f / std::sqrt(sum / static_cast<float>(width) + eps);
  out.resize(static_cast<std::size_t>(width));
  for (std::int64_t i = 0; i < width; ++i) out[i] = flat[i] * r;
}

// comb [m, m] made doubly stochastic: softmax over each row plus eps, columns normalised, then
// iters - 1 rounds of rows and columns (each denominator + eps).
void Sinkhorn(float* comb, std::int64_t m, int iters, float eps) {
  for (std::int64_t j = 0; j < m; ++j) {
    float* row = comb + j * m;
    const float top = *std::max_element(row, row + m);
    float sum = 0.0f;
    for (std::int64_t k = 0; k < m; ++k) sum += (row[k] = std::exp(row[k] - top));
    for (std::int64_t k = 0; k < m; ++k) row[k] = row[k] / sum + eps;
  }
  auto columns = [&] {
    for (std::int64_t k = 0; k < m; ++k) {
      float sum = 0.0f;
      for (std::int64_t j = 0; j < m; ++j) sum += comb[j * m + k];
      for (std::int64_t j = 0; j < m; ++j) comb[j * m + k] /= sum + eps;
    }
  };
  columns();
  for (int it = 1; it < iters; ++it) {
    for (std::int64_t j = 0; j < m; ++j) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < m; ++k) sum += comb[j * m + k];
      for (std::int64_t k = 0; k < m; ++k) comb[j * m + k] /= sum + eps;
    }
    columns();
  }
}

// out [hidden] = Σ_j pre[j] · stream_j.
void Collapse(const float* streams, const float* pre, std::int64_t mult, std::int64_t hidden, float* out) {
  for (std::int64_t d = 0; d < hidden; ++d) {
    float acc = 0.0f;
    for (std::int64_t j = 0; j < mult; ++j) acc += pre[j] * streams[j * hidden + d];
    out[d] = acc;
  }
}

void CheckStreams(const Tensor& streams, const HyperShape& sh) {
  FISSION_CHECK(streams.rank() == 3 && streams.shape[1] == sh.mult && streams.shape[2] == sh.hidden &&
                    streams.dtype == DType::kF32,
                "hyper-connection streams ", streams.shape.ToString(), " for ", sh.mult, " streams of ", sh.hidden);
}

}  // namespace

void CpuV4Ops::ExpandStreams(const Tensor& x, const Tensor& out) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1], mult = out.shape[1];
  FISSION_CHECK(out.rank() == 3 && out.shape[0] == n && out.shape[2] == hidden);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t j = 0; j < mult; ++j)
      std::memcpy(out.ptr<float>() + (t * mult + j) * hidden, x.ptr<float>() + t * hidden, hidden * sizeof(float));
}

void CpuV4Ops::HyperPre(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                        const HyperShape& sh, const Tensor& collapsed, const Tensor& post, const Tensor& comb) {
  CheckStreams(streams, sh);
  const std::int64_t n = streams.shape[0], m = sh.mult, width = m * sh.hidden, mixes = (2 + m) * m;
  FISSION_CHECK(fn.shape == Shape({mixes, width}) && base.numel() == mixes && scale.numel() == 3,
                "mHC weights fn", fn.shape.ToString(), " base", base.shape.ToString(), " for ", m, " streams");
  const float* s = scale.ptr<float>();
  const float* b = base.ptr<float>();
#pragma omp parallel for schedule(static) if (n * mixes * width > (1 << 16))
  for (std::int64_t t = 0; t < n; ++t) {
    const float* x = streams.ptr<float>() + t * width;
    std::vector<float> normed, mix(static_cast<std::size_t>(mixes)), pre(static_cast<std::size_t>(m));
    NormalizedFlat(x, width, sh.norm_eps, normed);
    for (std::int64_t i = 0; i < mixes; ++i) mix[i] = Dot(fn.ptr<float>() + i * width, normed.data(), width);
    float* p = post.ptr<float>() + t * m;
    float* c = comb.ptr<float>() + t * m * m;
    for (std::int64_t j = 0; j < m; ++j) {
      pre[j] = Sigmoid(mix[j] * s[0] + b[j]) + sh.eps;
      p[j] = 2.0f * Sigmoid(mix[m + j] * s[1] + b[m + j]);
    }
    for (std::int64_t i = 0; i < m * m; ++i) c[i] = mix[2 * m + i] * s[2] + b[2 * m + i];
    Sinkhorn(c, m, sh.sinkhorn_iters, sh.eps);
    Collapse(x, pre.data(), m, sh.hidden, collapsed.ptr<float>() + t * sh.hidden);
  }
}

void CpuV4Ops::HyperPost(const Tensor& block_out, const Tensor& streams, const Tensor& post, const Tensor& comb,
                         const Tensor& out) {
  const std::int64_t n = streams.shape[0], m = streams.shape[1], hidden = streams.shape[2];
  FISSION_CHECK(out.shape == streams.shape && out.data != streams.data && block_out.numel() == n * hidden);
  for (std::int64_t t = 0; t < n; ++t) {
    const float* x = streams.ptr<float>() + t * m * hidden;
    const float* y = block_out.ptr<float>() + t * hidden;
    const float* p = post.ptr<float>() + t * m;
    const float* c = comb.ptr<float>() + t * m * m;
    float* o = out.ptr<float>() + t * m * hidden;
    for (std::int64_t k = 0; k < m; ++k)
      for (std::int64_t d = 0; d < hidden; ++d) {
        float mixed = 0.0f;
        for (std::int64_t j = 0; j < m; ++j) mixed += c[j * m + k] * x[j * hidden + d];
        o[k * hidden + d] = p[k] * y[d] + mixed;
      }
  }
}

void CpuV4Ops::HyperHead(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                         const HyperShape& sh, const Tensor& out) {
  CheckStreams(streams, sh);
  const std::int64_t n = streams.shape[0], m = sh.mult, width = m * sh.hidden;
  FISSION_CHECK(fn.shape == Shape({m, width}) && base.numel() == m && scale.numel() == 1,
                "mHC head fn", fn.shape.ToString(), " for ", m, " streams");
  for (std::int64_t t = 0; t < n; ++t) {
    const float* x = streams.ptr<float>() + t * width;
    std::vector<float> normed, pre(static_cast<std::size_t>(m));
    NormalizedFlat(x, width, sh.norm_eps, normed);
    for (std::int64_t j = 0; j < m; ++j)
      pre[j] = Sigmoid(Dot(fn.ptr<float>() + j * width, normed.data(), width) * scale.ptr<float>()[0] +
                       base.ptr<float>()[j]) + sh.eps;
    Collapse(x, pre.data(), m, sh.hidden, out.ptr<float>() + t * sh.hidden);
  }
}

void CpuV4Ops::Rope(const Tensor& x, std::int64_t offset, std::int64_t dim, std::span<const std::int32_t> positions,
                    const Tensor& inv_freq, bool inverse) {
  FISSION_CHECK(x.rank() == 3 && offset >= 0 && offset + dim <= x.shape[2] && dim % 2 == 0 && inv_freq.numel() == dim / 2 &&
                    static_cast<std::int64_t>(positions.size()) == x.shape[0],
                "V4 rope over ", x.shape.ToString(), " dims [", offset, ", ", offset + dim, ")");
  const std::int64_t heads = x.shape[1], head_dim = x.shape[2], half = dim / 2;
  for (std::int64_t t = 0; t < x.shape[0]; ++t)
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * inv_freq.ptr<float>()[i];
      const float cos = std::cos(angle), sin = inverse ? -std::sin(angle) : std::sin(angle);
      for (std::int64_t h = 0; h < heads; ++h) {
        float* v = x.ptr<float>() + (t * heads + h) * head_dim + offset + 2 * i;
        const float a = v[0], b = v[1];
        v[0] = a * cos - b * sin;
        v[1] = b * cos + a * sin;
      }
    }
}

void CpuV4Ops::GroupedLinear(const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out) {
  const std::int64_t n = x.shape[0], k = x.shape[1] / groups, r = w.shape[0] / groups;
  FISSION_CHECK(x.shape[1] == groups * k && w.shape == Shape({groups * r, k}) && out.shape == Shape({n, groups * r}) &&
                    w.dtype == DType::kF32,
                "grouped linear x", x.shape.ToString(), " w", w.shape.ToString(), " in ", groups, " groups");
#pragma omp parallel for schedule(static) if (n * groups * r * k > (1 << 16))
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t g = 0; g < groups; ++g)
      for (std::int64_t i = 0; i < r; ++i)
        out.ptr<float>()[t * groups * r + g * r + i] =
            Dot(x.ptr<float>() + t * groups * k + g * k, w.ptr<float>() + (g * r + i) * k, k);
}

void CpuV4Ops::RouteSqrtSoftplus(const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                                 std::span<const std::int32_t> token_ids, std::int64_t top_k, float scaling,
                                 const Tensor& ids, const Tensor& weights) {
  CheckSqrtSoftplusRouting(router_logits, bias, hash_table, token_ids, top_k);
  const std::int64_t n = router_logits.shape[0], experts = router_logits.shape[1];
  const bool hashed = hash_table.data != nullptr;
  std::vector<float> scores(static_cast<std::size_t>(experts)), choice(scores.size());
  std::vector<std::int32_t> chosen(static_cast<std::size_t>(top_k));
  for (std::int64_t t = 0; t < n; ++t) {
    const float* logits = router_logits.ptr<float>() + t * experts;
    for (std::int64_t e = 0; e < experts; ++e) {
      const float x = logits[e];
      scores[e] = std::sqrt(x > 20.0f ? x : std::log1p(std::exp(x)));  // torch's softplus threshold
      if (!hashed) choice[e] = scores[e] + bias.ptr<float>()[e];
    }
    if (hashed) {
      const std::int32_t token = token_ids[static_cast<std::size_t>(t)];
      FISSION_CHECK(token >= 0 && token < hash_table.shape[0], "token id ", token, " outside the hash table");
      std::copy_n(hash_table.ptr<std::int32_t>() + token * top_k, top_k, chosen.begin());
      for (std::int32_t e : chosen)
        if (e < 0 || e >= experts) Fail("hash-routed expert id ", e, " outside the ", experts, " experts");
    } else {
      chosen = TopK(choice, top_k);
    }
    std::sort(chosen.begin(), chosen.end());  // a fixed order for the weighted sum
    float sum = 0.0f;
    for (std::int32_t e : chosen) sum += scores[e];
    for (std::int64_t k = 0; k < top_k; ++k) {
      ids.ptr<std::int32_t>()[t * top_k + k] = chosen[k];
      weights.ptr<float>()[t * top_k + k] = scores[chosen[k]] / (sum + 1e-20f) * scaling;
    }
  }
}

void CpuV4Ops::ClampedSwiGlu(const Tensor& gate_up, float limit, const Tensor& out) { SiluMul(gate_up, out, limit); }

void CpuV4Ops::MoeExperts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                          std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit,
                          const Tensor& out) {
  cpu::MoeExperts(x, ids, weights, gate_up, down, limit, out);
}

}  // namespace fission::kernels::cpu
