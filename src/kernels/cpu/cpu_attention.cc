// Multi-head latent attention over the paged latent cache, in its two mathematically equal forms,
// over every key a query sees (dense) or only over the keys DeepSeek Sparse Attention selected.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace fission::kernels::cpu {
namespace {

// Cache slot `slot`'s row decoded into `row` [kv_lora_rank + rope] (fp8: codes times their group's
// scale, then the bf16 rope part).
void DecodeFp8Latent(const Tensor& cache, std::int64_t slot, const MlaShape& sh, float* row) {
  const std::int64_t lora = sh.kv_lora_rank, groups = LatentScaleCount(lora);
  const std::uint8_t* entry = cache.ptr<std::uint8_t>() + slot * LatentEntryBytes(lora, sh.qk_rope_head_dim);
  ConvertToF32(DType::kF8E4M3, entry, row, lora);
  for (std::int64_t g = 0; g < groups; ++g) {
    float scale;
    std::memcpy(&scale, entry + lora + 4 * g, sizeof(float));
    for (std::int64_t i = g * kLatentFp8Group; i < std::min(lora, (g + 1) * kLatentFp8Group); ++i) row[i] *= scale;
  }
  ConvertToF32(DType::kBF16, entry + lora + 4 * groups, row + lora, sh.qk_rope_head_dim);
}

// The latent row of position p of a sequence: in the cache itself when exact, else decoded into
// `scratch`.
const float* LatentRow(const Tensor& cache, const SeqAttention& s, const MlaShape& sh, std::int64_t p,
                       float* scratch) {
  const std::int64_t slot = s.block_table[p / sh.page_size] * sh.page_size + p % sh.page_size;
  if (sh.latent_format == LatentFormat::kExact) return cache.ptr<float>() + slot * cache.shape[1];
  DecodeFp8Latent(cache, slot, sh, scratch);
  return scratch;
}

// Softmax of scores[0, len) in place (fp32 values, double sum).
void Softmax(float* scores, std::int64_t len) {
  float max = -INFINITY;
  for (std::int64_t j = 0; j < len; ++j) max = std::max(max, scores[j]);
  double sum = 0.0;
  for (std::int64_t j = 0; j < len; ++j) {
    scores[j] = std::exp(scores[j] - max);
    sum += scores[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (std::int64_t j = 0; j < len; ++j) scores[j] *= inv;
}

// The key positions query row `row` (at `position`) attends: all of [0, position] when `topk` is
// empty, else the row's selected positions (entries of -1 end the selection).
std::vector<std::int32_t> KeysOf(const Tensor& topk, std::int64_t row, std::int32_t position) {
  std::vector<std::int32_t> keys;
  if (topk.data == nullptr) {
    keys.resize(static_cast<std::size_t>(position) + 1);
    std::iota(keys.begin(), keys.end(), 0);
    return keys;
  }
  const std::int64_t k = topk.shape[1];
  const std::int32_t* sel = topk.ptr<std::int32_t>() + row * k;
  for (std::int64_t j = 0; j < k && sel[j] >= 0; ++j) {
    FISSION_CHECK(sel[j] <= position, "sparse attention: row ", row, " at position ", position,
                  " selected the later position ", sel[j]);
    keys.push_back(sel[j]);
  }
  return keys;
}

void CheckSeqs(const Tensor& cache, std::span<const SeqAttention> seqs, const MlaShape& sh) {
  const bool fp8 = sh.latent_format == LatentFormat::kFp8;
  const std::int64_t width = fp8 ? LatentEntryBytes(sh.kv_lora_rank, sh.qk_rope_head_dim)
                                 : sh.kv_lora_rank + sh.qk_rope_head_dim;
  FISSION_CHECK(cache.shape[1] == width && cache.dtype == (fp8 ? DType::kU8 : DType::kF32), "latent cache ",
                cache.shape.ToString(), " of ", DTypeName(cache.dtype), fp8 ? " for fp8 rows" : " for fp32 rows");
  for (const SeqAttention& s : seqs) {
    FISSION_CHECK(static_cast<std::int64_t>(s.block_table.size()) * sh.page_size >= s.kv_len, "block table of ",
                  s.block_table.size(), " pages cannot hold ", s.kv_len, " tokens");
    FISSION_CHECK(static_cast<std::int32_t>(s.query_positions.size()) == s.query_len);
    for (std::int32_t p : s.query_positions) FISSION_CHECK(p >= 0 && p < s.kv_len, "query position ", p);
  }
}

}  // namespace

void MlaAttentionExpanded(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                          const MlaShape& sh, const Tensor& out, const Tensor& topk) {
  CheckSeqs(cache, seqs, sh);
  const std::int64_t heads = sh.num_heads, nope = sh.qk_nope_head_dim, rope = sh.qk_rope_head_dim,
                     vdim = sh.v_head_dim, lora = sh.kv_lora_rank, qk = nope + rope;
  for (const SeqAttention& s : seqs) {
    const std::int64_t kv_len = s.kv_len;
    // Gather the latent rows, then expand keys and values for every head: [kv_len, heads*(nope+v)].
    Buffer latent(DType::kF32, Shape{kv_len, lora}), rope_keys(DType::kF32, Shape{kv_len, rope});
    std::vector<float> decoded(static_cast<std::size_t>(lora + rope));
    for (std::int64_t p = 0; p < kv_len; ++p) {
      const float* row = LatentRow(cache, s, sh, p, decoded.data());
      std::copy(row, row + lora, latent.ptr<float>() + p * lora);
      std::copy(row + lora, row + lora + rope, rope_keys.ptr<float>() + p * rope);
    }
    Buffer kv(DType::kF32, Shape{kv_len, heads * (nope + vdim)});
    Linear(latent, kv_b, kv);
    const float* kvp = kv.ptr<float>();
#pragma omp parallel for collapse(2) schedule(static) if (s.query_len * kv_len * heads > 4096)
    for (std::int64_t t = 0; t < s.query_len; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t row = s.query_start + t;
        const std::vector<std::int32_t> keys = KeysOf(topk, row, s.query_positions[t]);
        const std::int64_t visible = static_cast<std::int64_t>(keys.size());
        const float* qh = q.ptr<float>() + (row * heads + h) * qk;
        std::vector<float> scores(visible);
        for (std::int64_t j = 0; j < visible; ++j) {
          const float* k_nope = kvp + keys[j] * heads * (nope + vdim) + h * (nope + vdim);
          scores[j] = (Dot(qh, k_nope, nope) + Dot(qh + nope, rope_keys.ptr<float>() + keys[j] * rope, rope)) *
                      sh.softmax_scale;
        }
        Softmax(scores.data(), visible);
        float* o = out.ptr<float>() + (row * heads + h) * vdim;
        for (std::int64_t d = 0; d < vdim; ++d) {
          float acc = 0.0f;
          for (std::int64_t j = 0; j < visible; ++j)
            acc += scores[j] * kvp[keys[j] * heads * (nope + vdim) + h * (nope + vdim) + nope + d];
          o[d] = acc;
        }
      }
    }
  }
}

void MlaAttentionAbsorbed(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                          const MlaShape& sh, const Tensor& out, const Tensor& topk) {
  CheckSeqs(cache, seqs, sh);
  const std::int64_t heads = sh.num_heads, nope = sh.qk_nope_head_dim, rope = sh.qk_rope_head_dim,
                     vdim = sh.v_head_dim, lora = sh.kv_lora_rank, qk = nope + rope;
  const float* w = kv_b.ptr<float>();  // rows h*(nope+v) + [0, nope) are W_UK, the next v rows W_UV
  for (const SeqAttention& s : seqs) {
#pragma omp parallel for collapse(2) schedule(static) if (s.query_len * heads * s.kv_len > 4096)
    for (std::int64_t t = 0; t < s.query_len; ++t) {
      for (std::int64_t h = 0; h < heads; ++h) {
        const std::int64_t row = s.query_start + t;
        const std::vector<std::int32_t> keys = KeysOf(topk, row, s.query_positions[t]);
        const std::int64_t visible = static_cast<std::int64_t>(keys.size());
        const float* qh = q.ptr<float>() + (row * heads + h) * qk;
        const float* w_uk = w + h * (nope + vdim) * lora;
        const float* w_uv = w_uk + nope * lora;
        // q_latent[l] = Σ_i q_nope[i] · W_UK[i, l]
        std::vector<float> q_latent(lora, 0.0f);
        for (std::int64_t i = 0; i < nope; ++i)
          for (std::int64_t l = 0; l < lora; ++l) q_latent[l] += qh[i] * w_uk[i * lora + l];
        std::vector<float> scores(visible), decoded(static_cast<std::size_t>(lora + rope));
        for (std::int64_t j = 0; j < visible; ++j) {
          const float* c = LatentRow(cache, s, sh, keys[j], decoded.data());
          scores[j] = (Dot(q_latent.data(), c, lora) + Dot(qh + nope, c + lora, rope)) * sh.softmax_scale;
        }
        Softmax(scores.data(), visible);
        std::vector<float> o_latent(lora, 0.0f);
        for (std::int64_t j = 0; j < visible; ++j) {
          const float* c = LatentRow(cache, s, sh, keys[j], decoded.data());
          for (std::int64_t l = 0; l < lora; ++l) o_latent[l] += scores[j] * c[l];
        }
        float* o = out.ptr<float>() + (row * heads + h) * vdim;
        for (std::int64_t d = 0; d < vdim; ++d) o[d] = Dot(w_uv + d * lora, o_latent.data(), lora);
      }
    }
  }
}

void WriteLatent(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache, const MlaShape& sh) {
  if (sh.latent_format == LatentFormat::kExact) return WriteKv(rows, slots, cache);
  const std::int64_t lora = sh.kv_lora_rank, rope = sh.qk_rope_head_dim, groups = LatentScaleCount(lora);
  const std::int64_t bytes = LatentEntryBytes(lora, rope);
  FISSION_CHECK(cache.dtype == DType::kU8 && cache.shape[1] == bytes &&
                    rows.numel() == static_cast<std::int64_t>(slots.size()) * (lora + rope),
                "fp8 latent cache ", cache.shape.ToString(), " for rows ", rows.shape.ToString());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    FISSION_CHECK(slots[i] >= -1 && slots[i] < cache.shape[0], "kv slot ", slots[i]);
    if (slots[i] < 0) continue;
    const float* row = rows.ptr<float>() + static_cast<std::int64_t>(i) * (lora + rope);
    std::uint8_t* entry = cache.ptr<std::uint8_t>() + slots[i] * bytes;
    std::vector<float> scales(static_cast<std::size_t>(groups));
    QuantizeFp8PerTokenGroup(row, lora, entry, scales.data());
    std::memcpy(entry + lora, scales.data(), 4 * groups);
    ConvertFromF32(DType::kBF16, row + lora, entry + lora + 4 * groups, rope);
  }
}

void SplitLatents(const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps, const RopeArgs& rope,
                  const Tensor& q_latent, const Tensor& kv_row) {
  const std::int64_t q_lora = q_latent.shape[-1], kv_width = kv_row.shape[-1], n = q_latent.numel() / q_lora;
  FISSION_CHECK(a.dtype == DType::kF32 && q_latent.dtype == DType::kF32 && kv_row.dtype == DType::kF32 &&
                    a.numel() == n * (q_lora + kv_width) && kv_row.numel() == n * kv_width &&
                    q_norm.numel() == q_lora && kv_norm.numel() < kv_width,
                "SplitLatents a", a.shape.ToString(), " q_latent", q_latent.shape.ToString(), " kv_row",
                kv_row.shape.ToString(), " norms ", q_norm.numel(), " and ", kv_norm.numel());
  for (std::int64_t i = 0; i < n; ++i) {
    const float* row = a.ptr<float>() + i * (q_lora + kv_width);
    std::memcpy(q_latent.ptr<float>() + i * q_lora, row, q_lora * sizeof(float));
    std::memcpy(kv_row.ptr<float>() + i * kv_width, row + q_lora, kv_width * sizeof(float));
  }
  RmsNorm(q_latent, q_norm, eps, q_latent);
  RmsNorm(kv_row, kv_norm, eps, kv_row);
  const std::int64_t lora = kv_norm.numel();
  Rope(kv_row.View(Shape{n, 1, kv_width}), lora, kv_width - lora, rope.positions,
       rope.inv_freq, rope.scaling, rope.interleaved);
}

}  // namespace fission::kernels::cpu
