// The lightning indexer of DeepSeek Sparse Attention: its key cache (exact or e4m3 with a
// per-token scale) and the scoring and top-k selection of every query (kernels/dsa_ops.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace fission::kernels::cpu {
namespace {

constexpr float kIndexKeyE4M3Max = 448.0f;

// One key of the cache, decoded to fp32 (codes times the token's scale for an fp8 cache).
void ReadKey(const Tensor& cache, std::int64_t slot, const IndexerShape& sh, float* key) {
  if (sh.key_format == IndexKeyFormat::kExact) {
    std::memcpy(key, cache.ptr<float>() + slot * sh.head_dim, sh.head_dim * sizeof(float));
    return;
  }
  const std::uint8_t* entry = cache.ptr<std::uint8_t>() + slot * IndexKeyWidth(sh.key_format, sh.head_dim);
  float scale;
  std::memcpy(&scale, entry + sh.head_dim, sizeof(float));
  ConvertToF32(DType::kF8E4M3, entry, key, sh.head_dim);
  for (std::int64_t i = 0; i < sh.head_dim; ++i) key[i] *= scale;
}

void CheckCache(const Tensor& cache, const IndexerShape& sh) {
  const bool fp8 = sh.key_format == IndexKeyFormat::kFp8;
  FISSION_CHECK(cache.rank() == 2 && cache.shape[1] == IndexKeyWidth(sh.key_format, sh.head_dim) &&
                    cache.dtype == (fp8 ? DType::kU8 : DType::kF32),
                "index key cache ", cache.shape.ToString(), " of ", DTypeName(cache.dtype), " for head_dim ",
                sh.head_dim, fp8 ? " (fp8)" : " (exact fp32)");
}

// q [n_heads, head_dim] of one row, as the dot products see it: unchanged for an exact cache,
// else each head quantized and decoded (its scale folded into `head_scale`).
void PrepareQuery(const float* q, const IndexerShape& sh, std::vector<float>& q_used, std::vector<float>& head_scale) {
  q_used.assign(q, q + sh.n_heads * sh.head_dim);
  head_scale.assign(static_cast<std::size_t>(sh.n_heads), 1.0f);
  if (sh.key_format != IndexKeyFormat::kFp8) return;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(sh.head_dim));
  for (std::int64_t h = 0; h < sh.n_heads; ++h) {
    head_scale[h] = QuantizeFp8Row(q + h * sh.head_dim, sh.head_dim, codes.data());
    ConvertToF32(DType::kF8E4M3, codes.data(), q_used.data() + h * sh.head_dim, sh.head_dim);
  }
}

}  // namespace

float QuantizeFp8Row(const float* x, std::int64_t n, std::uint8_t* codes) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = std::max(amax, kIndexFp8MinAmax) / kIndexKeyE4M3Max;
  for (std::int64_t i = 0; i < n; ++i) codes[i] = F32ToF8E4M3(x[i] / scale);
  return scale;
}

void WriteIndexKeys(const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                    const IndexerShape& sh) {
  CheckCache(cache, sh);
  FISSION_CHECK(keys.numel() == static_cast<std::int64_t>(slots.size()) * sh.head_dim, "index keys ",
                keys.shape.ToString(), " for ", slots.size(), " slots");
  if (sh.key_format == IndexKeyFormat::kExact) return WriteKv(keys, slots, cache);
  const std::int64_t width = IndexKeyWidth(sh.key_format, sh.head_dim);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    FISSION_CHECK(slots[i] >= -1 && slots[i] < cache.shape[0], "index key slot ", slots[i]);
    if (slots[i] < 0) continue;
    std::uint8_t* entry = cache.ptr<std::uint8_t>() + slots[i] * width;
    const float scale = QuantizeFp8Row(keys.ptr<float>() + i * sh.head_dim, sh.head_dim, entry);
    std::memcpy(entry + sh.head_dim, &scale, sizeof(float));
  }
}

void IndexerTopK(const Tensor& q, const Tensor& weights, const Tensor& cache, std::span<const SeqAttention> seqs,
                 const IndexerShape& sh, const Tensor& topk) {
  CheckCache(cache, sh);
  FISSION_CHECK(q.shape[-1] == sh.head_dim && q.numel() % (sh.n_heads * sh.head_dim) == 0 &&
                    topk.dtype == DType::kI32 && topk.shape[1] == sh.topk,
                "IndexerTopK q", q.shape.ToString(), " topk", topk.shape.ToString());
  const std::int64_t d = sh.head_dim, heads = sh.n_heads, per = sh.tokens_per_entry;
  for (const SeqAttention& s : seqs) {
    // The sequence's keys, decoded once.
    const std::int64_t num_keys = s.kv_len / per;
    std::vector<float> keys(static_cast<std::size_t>(num_keys * d));
    for (std::int64_t k = 0; k < num_keys; ++k)
      ReadKey(cache, EntrySlot(s.block_table, sh.page_size, per, k), sh, keys.data() + k * d);
#pragma omp parallel for schedule(dynamic) if (s.query_len * num_keys * heads * d > (1 << 16))
    for (std::int64_t t = 0; t < s.query_len; ++t) {
      const std::int64_t row = s.query_start + t;
      const std::int64_t visible = (s.query_positions[t] + 1) / per;
      std::int32_t* out = topk.ptr<std::int32_t>() + row * sh.topk;
      std::fill(out, out + sh.topk, -1);
      if (visible <= sh.topk) {  // every key is selected
        std::iota(out, out + visible, 0);
        continue;
      }
      std::vector<float> q_used, head_scale;
      PrepareQuery(q.ptr<float>() + row * heads * d, sh, q_used, head_scale);
      const float* w = weights.ptr<float>() + row * heads;
      std::vector<float> score(static_cast<std::size_t>(visible));
      for (std::int64_t p = 0; p < visible; ++p) {
        float sum = 0.0f;
        for (std::int64_t h = 0; h < heads; ++h) {
          const float dot = Dot(q_used.data() + h * d, keys.data() + p * d, d) * head_scale[h];
          sum += sh.weight_scale * w[h] * std::max(dot, 0.0f);
        }
        score[p] = sum;
      }
      std::vector<std::int32_t> order(static_cast<std::size_t>(visible));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + sh.topk, order.end(), [&](std::int32_t a, std::int32_t b) {
        return score[a] > score[b] || (score[a] == score[b] && a < b);
      });
      std::copy(order.begin(), order.begin() + sh.topk, out);
    }
  }
}

}  // namespace fission::kernels::cpu
