// Dense and elementwise CPU operations.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"

namespace fission::kernels::cpu {
namespace {
void CheckF32(const Tensor& t, const char* what) {
  FISSION_CHECK(t.dtype == DType::kF32 && t.device.type == DeviceType::kCpu, what, " must be a host fp32 tensor");
}
std::int64_t LastDim(const Tensor& t) { return t.rank() == 0 ? 1 : t.shape[-1]; }
}  // namespace

float Dot(const float* a, const float* b, std::int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) acc[l] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void Linear(const Tensor& x, const Tensor& w, const Tensor& out) {
  CheckF32(x, "Linear x");
  CheckF32(w, "Linear w");
  CheckF32(out, "Linear out");
  const std::int64_t k = w.shape[1], m = w.shape[0];
  const std::int64_t n = x.numel() / k;
  FISSION_CHECK(LastDim(x) == k && out.numel() == n * m, "Linear shapes x", x.shape.ToString(), " w",
                w.shape.ToString(), " out", out.shape.ToString());
  const float* xp = x.ptr<float>();
  const float* wp = w.ptr<float>();
  float* op = out.ptr<float>();
  // Tiles of 64 weight rows keep a tile in cache while every token row streams past it.
  constexpr std::int64_t kTile = 64;
  const std::int64_t tiles = (m + kTile - 1) / kTile;
#pragma omp parallel for collapse(2) schedule(static) if (n * m * k > (1 << 16))
  for (std::int64_t t = 0; t < tiles; ++t) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t end = std::min(m, (t + 1) * kTile);
      for (std::int64_t j = t * kTile; j < end; ++j) op[i * m + j] = Dot(xp + i * k, wp + j * k, k);
    }
  }
}

void Embedding(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start, const Tensor& out) {
  CheckF32(table, "Embedding table");
  const std::int64_t rows = table.shape[0], d = table.shape[1];
  FISSION_CHECK(out.numel() == static_cast<std::int64_t>(ids.size()) * d);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t row = ids[i] - vocab_start;
    float* dst = out.ptr<float>() + i * d;
    if (row >= 0 && row < rows) {
      std::memcpy(dst, table.ptr<float>() + row * d, d * sizeof(float));
    } else {
      std::memset(dst, 0, d * sizeof(float));
    }
  }
}

void Zero(const Tensor& x) { std::memset(x.data, 0, x.bytes()); }

void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) {
  const std::int64_t d = weight.numel(), width = LastDim(x);
  const std::int64_t n = x.numel() / width;
  FISSION_CHECK(width >= d && out.numel() == x.numel(), "RmsNorm x", x.shape.ToString(), " weight ", d);
  const float* w = weight.ptr<float>();
#pragma omp parallel for schedule(static) if (n * d > (1 << 15))
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = x.ptr<float>() + i * width;
    float* dst = out.ptr<float>() + i * width;
    if (dst != row) std::memcpy(dst + d, row + d, (width - d) * sizeof(float));
    double sum = 0.0;
    for (std::int64_t j = 0; j < d; ++j) sum += static_cast<double>(row[j]) * row[j];
    const float variance = static_cast<float>(sum / static_cast<double>(d));
    const float inv = 1.0f / std::sqrt(variance + eps);
    for (std::int64_t j = 0; j < d; ++j) dst[j] = w[j] * (row[j] * inv);
  }
}

void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) {
  const std::int64_t d = LastDim(x), n = x.numel() / d;
  FISSION_CHECK(weight.numel() == d && bias.numel() == d && out.numel() == x.numel(), "LayerNorm x",
                x.shape.ToString(), " weight ", weight.numel(), " bias ", bias.numel());
  const float* w = weight.ptr<float>();
  const float* beta = bias.ptr<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = x.ptr<float>() + i * d;
    float* dst = out.ptr<float>() + i * d;
    double sum = 0.0;
    for (std::int64_t j = 0; j < d; ++j) sum += row[j];
    const float mean = static_cast<float>(sum / static_cast<double>(d));
    double sq = 0.0;
    for (std::int64_t j = 0; j < d; ++j) sq += static_cast<double>(row[j] - mean) * (row[j] - mean);
    const float inv = 1.0f / std::sqrt(static_cast<float>(sq / static_cast<double>(d)) + eps);
    for (std::int64_t j = 0; j < d; ++j) dst[j] = (row[j] - mean) * inv * w[j] + beta[j];
  }
}

void Add(const Tensor& a, const Tensor& b, const Tensor& out) {
  FISSION_CHECK(a.numel() == b.numel() && a.numel() == out.numel());
  const float* ap = a.ptr<float>();
  const float* bp = b.ptr<float>();
  float* op = out.ptr<float>();
  for (std::int64_t i = 0; i < a.numel(); ++i) op[i] = ap[i] + bp[i];
}

void SiluMul(const Tensor& gate_up, const Tensor& out, float limit) {
  const std::int64_t inter = LastDim(out);
  const std::int64_t n = out.numel() / inter;
  FISSION_CHECK(LastDim(gate_up) == 2 * inter && gate_up.numel() == 2 * out.numel());
  for (std::int64_t i = 0; i < n; ++i) {
    const float* g = gate_up.ptr<float>() + i * 2 * inter;
    const float* u = g + inter;
    float* o = out.ptr<float>() + i * inter;
    for (std::int64_t j = 0; j < inter; ++j) {
      float gate = g[j], up = u[j];
      if (limit > 0.0f) {  // DeepSeek-V4's clamp: the gate from above, the up projection both ways
        gate = std::min(gate, limit);
        up = std::clamp(up, -limit, limit);
      }
      o[j] = (gate / (1.0f + std::exp(-gate))) * up;
    }
  }
}

void Rope(const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim, std::span<const std::int32_t> positions,
          const Tensor& inv_freq, float scaling, bool interleaved) {
  FISSION_CHECK(x.rank() == 3 && rope_offset + rope_dim <= x.shape[2] && rope_dim % 2 == 0);
  const std::int64_t n = x.shape[0], heads = x.shape[1], head_dim = x.shape[2], half = rope_dim / 2;
  FISSION_CHECK(static_cast<std::int64_t>(positions.size()) == n && inv_freq.numel() == half);
  const float* freq = inv_freq.ptr<float>();
  std::vector<float> cos(half), sin(half), tmp(rope_dim);
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(positions[t]) * freq[i];
      cos[i] = std::cos(angle) * scaling;
      sin[i] = std::sin(angle) * scaling;
    }
    for (std::int64_t h = 0; h < heads; ++h) {
      float* v = x.ptr<float>() + (t * heads + h) * head_dim + rope_offset;
      for (std::int64_t i = 0; i < half; ++i) {
        const float a = interleaved ? v[2 * i] : v[i];
        const float b = interleaved ? v[2 * i + 1] : v[i + half];
        tmp[i] = a * cos[i] + (-b) * sin[i];
        tmp[i + half] = b * cos[i] + a * sin[i];
      }
      std::memcpy(v, tmp.data(), rope_dim * sizeof(float));
    }
  }
}

void WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) {
  const std::int64_t width = cache.shape[1];
  FISSION_CHECK(rows.numel() == static_cast<std::int64_t>(slots.size()) * width);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    FISSION_CHECK(slots[i] >= -1 && slots[i] < cache.shape[0], "kv slot ", slots[i]);
    if (slots[i] < 0) continue;  // a padding row
    std::memcpy(cache.ptr<float>() + slots[i] * width, rows.ptr<float>() + i * width, width * sizeof(float));
  }
}

void GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) {
  const std::int64_t d = LastDim(x);
  const std::int64_t n = x.numel() / d;
  FISSION_CHECK(out.numel() == static_cast<std::int64_t>(indices.size()) * d);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    FISSION_CHECK(indices[i] >= 0 && indices[i] < n);
    std::memcpy(out.ptr<float>() + i * d, x.ptr<float>() + indices[i] * d, d * sizeof(float));
  }
}

}  // namespace fission::kernels::cpu
