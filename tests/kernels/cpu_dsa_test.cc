// The CPU reference of DeepSeek Sparse Attention (cpu_dsa.cc, and MLA over a selection in
// cpu_attention.cc): the indexer's scores and top-k order against a direct double-precision
// evaluation, its fp8 key storage, and sparse MLA against dense MLA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/host_view_testlib.h"

namespace fission::kernels::cpu {
namespace {

using testing::View;

// One sequence of `kv_len` keys on shuffled pages, with queries at `positions`.
struct Sequence {
  std::vector<std::int32_t> table, positions;
  SeqAttention Attention(std::int32_t query_start, std::int32_t kv_len) const {
    SeqAttention s;
    s.query_start = query_start;
    s.query_len = static_cast<std::int32_t>(positions.size());
    s.kv_len = kv_len;
    s.query_positions = positions;
    s.block_table = table;
    return s;
  }
};

Sequence ShuffledPages(std::int32_t kv_len, std::int32_t page_size, std::vector<std::int32_t> positions,
                       std::mt19937& rng) {
  Sequence s;
  s.table.resize((kv_len + page_size - 1) / page_size);
  std::iota(s.table.begin(), s.table.end(), 0);
  std::shuffle(s.table.begin(), s.table.end(), rng);
  s.positions = std::move(positions);
  return s;
}

struct IndexerCase {
  IndexerShape shape;
  std::vector<float> q, w, keys;  // keys in position order
  std::vector<float> cache;       // exact cache [slots, head_dim]
};

IndexerCase RandomIndexer(std::int32_t kv_len, const Sequence& seq, std::mt19937& rng) {
  IndexerCase c;
  c.shape.n_heads = 4;
  c.shape.head_dim = 16;
  c.shape.topk = 8;
  c.shape.weight_scale = 0.125f;
  c.shape.page_size = 4;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t d = c.shape.head_dim, n = static_cast<std::int64_t>(seq.positions.size());
  c.q.resize(n * c.shape.n_heads * d);
  c.w.resize(n * c.shape.n_heads);
  c.keys.resize(kv_len * d);
  for (float& v : c.q) v = normal(rng);
  for (float& v : c.w) v = normal(rng);
  for (float& v : c.keys) v = normal(rng);
  c.cache.assign(seq.table.size() * c.shape.page_size * d, 0.0f);
  for (std::int32_t p = 0; p < kv_len; ++p)
    std::memcpy(&c.cache[(seq.table[p / 4] * 4 + p % 4) * d], &c.keys[p * d], d * sizeof(float));
  return c;
}

double Score(const IndexerCase& c, std::int64_t row, std::int32_t p) {
  double sum = 0.0;
  const std::int64_t d = c.shape.head_dim;
  for (std::int64_t h = 0; h < c.shape.n_heads; ++h) {
    double dot = 0.0;
    for (std::int64_t i = 0; i < d; ++i) dot += double(c.q[(row * c.shape.n_heads + h) * d + i]) * c.keys[p * d + i];
    sum += double(c.shape.weight_scale) * c.w[row * c.shape.n_heads + h] * std::max(dot, 0.0);
  }
  return sum;
}

TEST(CpuDsa, IndexerSelectsTheHighestScoresHighestFirst) {
  std::mt19937 rng(3);
  const std::int32_t kv_len = 37;
  // Queries that see fewer keys than top-k (all selected in order), exactly top-k, and more.
  const Sequence seq = ShuffledPages(kv_len, 4, {0, 5, 7, 8, 20, 36}, rng);
  IndexerCase c = RandomIndexer(kv_len, seq, rng);
  const std::int64_t n = static_cast<std::int64_t>(seq.positions.size()), k = c.shape.topk;
  std::vector<std::int32_t> topk(n * k, 12345);
  const SeqAttention s = seq.Attention(0, kv_len);
  IndexerTopK(View(c.q.data(), DType::kF32, Shape{n, c.shape.n_heads, c.shape.head_dim}),
              View(c.w.data(), DType::kF32, Shape{n, c.shape.n_heads}),
              View(c.cache.data(), DType::kF32, Shape{static_cast<std::int64_t>(c.cache.size()) / 16, 16}), {&s, 1},
              c.shape, View(topk.data(), DType::kI32, Shape{n, k}));
  for (std::int64_t t = 0; t < n; ++t) {
    const std::int32_t visible = seq.positions[t] + 1;
    const std::int32_t* got = &topk[t * k];
    if (visible <= k) {
      for (std::int32_t j = 0; j < k; ++j) EXPECT_EQ(got[j], j < visible ? j : -1) << "row " << t << " entry " << j;
      continue;
    }
    std::vector<std::int32_t> order(visible);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return Score(c, t, a) > Score(c, t, b); });
    for (std::int32_t j = 0; j < k; ++j) EXPECT_EQ(got[j], order[j]) << "row " << t << " entry " << j;
  }
}

TEST(CpuDsa, EqualScoresAreOrderedByPosition) {
  std::mt19937 rng(4);
  const std::int32_t kv_len = 20;
  const Sequence seq = ShuffledPages(kv_len, 4, {19}, rng);
  IndexerCase c = RandomIndexer(kv_len, seq, rng);
  // Keys 3, 9 and 15 are one key; key 17 is its negation (every head's ReLU is zero there, as for
  // 11 and 13): ties the order must break by position.
  for (std::int32_t p : {9, 15}) std::copy_n(&c.keys[3 * 16], 16, &c.keys[p * 16]);
  for (std::int32_t p : {11, 13, 17})
    for (int i = 0; i < 16; ++i) c.keys[p * 16 + i] = 0.0f;
  for (std::int32_t p = 0; p < kv_len; ++p)
    std::memcpy(&c.cache[(seq.table[p / 4] * 4 + p % 4) * 16], &c.keys[p * 16], 16 * sizeof(float));
  c.shape.topk = 19;  // all but one
  std::vector<std::int32_t> topk(19);
  const SeqAttention s = seq.Attention(0, kv_len);
  IndexerTopK(View(c.q.data(), DType::kF32, Shape{1, 4, 16}), View(c.w.data(), DType::kF32, Shape{1, 4}),
              View(c.cache.data(), DType::kF32, Shape{static_cast<std::int64_t>(c.cache.size()) / 16, 16}), {&s, 1},
              c.shape, View(topk.data(), DType::kI32, Shape{1, 19}));
  auto at = [&](std::int32_t p) { return std::find(topk.begin(), topk.end(), p) - topk.begin(); };
  EXPECT_LT(at(3), at(9));
  EXPECT_LT(at(9), at(15));
  if (at(11) < 19 && at(13) < 19) {
    EXPECT_LT(at(11), at(13));
  }
  if (at(13) < 19 && at(17) < 19) {
    EXPECT_LT(at(13), at(17));
  }
}

TEST(CpuDsa, Fp8KeysRoundTripWithinE4M3Precision) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  IndexerShape shape;
  shape.head_dim = 32;
  shape.key_format = IndexKeyFormat::kFp8;
  const std::int64_t width = IndexKeyWidth(shape.key_format, shape.head_dim);
  std::vector<float> keys(3 * 32);
  for (float& v : keys) v = normal(rng);
  std::vector<std::uint8_t> cache(5 * width, 0);
  const std::vector<std::int64_t> slots = {4, -1, 1};
  WriteIndexKeys(View(keys.data(), DType::kF32, Shape{3, 32}), slots, View(cache.data(), DType::kU8, Shape{5, width}),
                 shape);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] < 0) continue;
    const std::uint8_t* entry = &cache[slots[i] * width];
    float scale;
    std::memcpy(&scale, entry + 32, 4);
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(keys[i * 32 + j]));
    EXPECT_FLOAT_EQ(scale, amax / 448.0f);
    for (int j = 0; j < 32; ++j) {
      const float x = keys[i * 32 + j];
      EXPECT_LE(std::fabs(F8E4M3ToF32(entry[j]) * scale - x), std::fabs(x) / 16.0f + scale * std::ldexp(1.0f, -9));
    }
  }
  for (int j = 0; j < width; ++j) EXPECT_EQ(cache[0 * width + j], 0) << "an untouched slot";
}

// With fp8 keys (and queries) the selection is the exact one up to keys whose scores are close:
// most of each row's selection agrees.
TEST(CpuDsa, Fp8SelectionMostlyAgreesWithExact) {
  std::mt19937 rng(6);
  const std::int32_t kv_len = 200;
  std::vector<std::int32_t> positions;
  for (std::int32_t p = 100; p < 200; p += 7) positions.push_back(p);
  const Sequence seq = ShuffledPages(kv_len, 4, positions, rng);
  IndexerCase c = RandomIndexer(kv_len, seq, rng);
  c.shape.topk = 32;
  const std::int64_t n = static_cast<std::int64_t>(positions.size()), k = 32, slots = c.cache.size() / 16;
  const SeqAttention s = seq.Attention(0, kv_len);
  std::vector<std::int32_t> exact(n * k), fp8(n * k);
  IndexerTopK(View(c.q.data(), DType::kF32, Shape{n, 4, 16}), View(c.w.data(), DType::kF32, Shape{n, 4}),
              View(c.cache.data(), DType::kF32, Shape{slots, 16}), {&s, 1}, c.shape,
              View(exact.data(), DType::kI32, Shape{n, k}));
  IndexerShape q8 = c.shape;
  q8.key_format = IndexKeyFormat::kFp8;
  std::vector<std::uint8_t> cache8(slots * 20);
  std::vector<std::int64_t> all(kv_len);
  for (std::int32_t p = 0; p < kv_len; ++p) all[p] = seq.table[p / 4] * 4 + p % 4;
  WriteIndexKeys(View(c.keys.data(), DType::kF32, Shape{kv_len, 16}), all, View(cache8.data(), DType::kU8, Shape{slots, 20}),
                 q8);
  IndexerTopK(View(c.q.data(), DType::kF32, Shape{n, 4, 16}), View(c.w.data(), DType::kF32, Shape{n, 4}),
              View(cache8.data(), DType::kU8, Shape{slots, 20}), {&s, 1}, q8, View(fp8.data(), DType::kI32, Shape{n, k}));
  for (std::int64_t t = 0; t < n; ++t) {
    int common = 0;
    for (std::int64_t j = 0; j < k; ++j)
      common += std::count(fp8.begin() + t * k, fp8.begin() + (t + 1) * k, exact[t * k + j]) > 0;
    EXPECT_GE(common, 28) << "row " << t;
  }
}

struct MlaCase {
  MlaShape shape;
  std::vector<float> q, cache, kv_b;
};

MlaCase RandomMla(std::int64_t n, std::int64_t slots, std::mt19937& rng) {
  MlaCase c;
  c.shape = {2, 8, 4, 8, 16, 0.3f, 4};
  std::normal_distribution<float> normal(0.0f, 1.0f);
  c.q.resize(n * 2 * 12);
  c.cache.resize(slots * 20);
  c.kv_b.resize(2 * 16 * 16);
  for (auto* v : {&c.q, &c.cache, &c.kv_b})
    for (float& x : *v) x = normal(rng);
  return c;
}

// Selecting every visible key is dense MLA, bit for bit (the same loop over the same keys); a
// subset equals dense MLA over a cache holding only that subset's rows.
TEST(CpuDsa, SparseMlaIsDenseMlaOverTheSelection) {
  std::mt19937 rng(7);
  const std::int32_t kv_len = 24;
  const Sequence seq = ShuffledPages(kv_len, 4, {3, 17, 23}, rng);
  const std::int64_t n = 3, slots = 24;
  MlaCase c = RandomMla(n, slots, rng);
  const SeqAttention s = seq.Attention(0, kv_len);
  const Tensor q = View(c.q.data(), DType::kF32, Shape{n, 2, 12});
  const Tensor cache = View(c.cache.data(), DType::kF32, Shape{slots, 20});
  const Tensor kv_b = View(c.kv_b.data(), DType::kF32, Shape{32, 16});
  for (bool absorbed : {false, true}) {
    auto run = [&](const Tensor& cache_used, const SeqAttention& seq_used, const Tensor& topk) {
      std::vector<float> out(n * 2 * 8, 0.0f);
      const Tensor o = View(out.data(), DType::kF32, Shape{n, 2, 8});
      if (absorbed) {
        MlaAttentionAbsorbed(q, cache_used, kv_b, {&seq_used, 1}, c.shape, o, topk);
      } else {
        MlaAttentionExpanded(q, cache_used, kv_b, {&seq_used, 1}, c.shape, o, topk);
      }
      return out;
    };
    std::vector<std::int32_t> every(n * 30, -1);
    for (std::int64_t t = 0; t < n; ++t) std::iota(&every[t * 30], &every[t * 30] + seq.positions[t] + 1, 0);
    EXPECT_EQ(run(cache, s, View(every.data(), DType::kI32, Shape{n, 30})), run(cache, s, Tensor{}));

    // Each row keeps the keys at even positions up to its own: a sequence whose cache holds only
    // those rows, queried at the matching compacted positions, is the same attention.
    std::vector<std::int32_t> even(n * 12, -1);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int32_t p = 0, j = 0; p <= seq.positions[t]; p += 2) even[t * 12 + j++] = p;
    std::vector<float> compact(12 * 20);
    for (std::int32_t p = 0; p < kv_len; p += 2)
      std::memcpy(&compact[(p / 2) * 20], &c.cache[(seq.table[p / 4] * 4 + p % 4) * 20], 20 * sizeof(float));
    Sequence packed{{0, 1, 2}, {}};
    for (std::int32_t p : seq.positions) packed.positions.push_back(p / 2);
    const std::vector<float> want =
        run(View(compact.data(), DType::kF32, Shape{12, 20}), packed.Attention(0, 12), Tensor{});
    const std::vector<float> got = run(cache, s, View(even.data(), DType::kI32, Shape{n, 12}));
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f) << absorbed << " " << i;
  }
}

TEST(CpuDsa, LayerNormMatchesItsDefinition) {
  std::vector<float> x = {1, 2, 3, 4, -1, 0, 1, 10}, w = {1, 2, 0.5f, 1}, b = {0.1f, 0, -0.1f, 1}, out(8);
  LayerNorm(View(x.data(), DType::kF32, Shape{2, 4}), View(w.data(), DType::kF32, Shape{4}),
            View(b.data(), DType::kF32, Shape{4}), 1e-6f, View(out.data(), DType::kF32, Shape{2, 4}));
  for (int r = 0; r < 2; ++r) {
    double mean = 0, var = 0;
    for (int i = 0; i < 4; ++i) mean += x[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) var += (x[r * 4 + i] - mean) * (x[r * 4 + i] - mean) / 4.0;
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(out[r * 4 + i], (x[r * 4 + i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i], 1e-5) << r << i;
  }
}

}  // namespace
}  // namespace fission::kernels::cpu
