// DeepSeek-V4's CPU operations that the model parity tests (tests/model/v4_model_test.cc and the
// golden parity) do not pin on their own: the fp8 entry format, the compressor's pooling against a
// direct softmax, and the hyper-connection's doubly stochastic mixing.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_v4.h"
#include "kernels/host_view_testlib.h"
#include "tensor/dtype.h"

namespace fission::kernels::cpu {
namespace {

using testing::View;

// Rows of 576 values (V4-Flash: 448 nope, 64 rope) and of 32 (the fixture: 24 nope, one partial
// block, 8 rope) at several magnitudes, a zero block and a huge value.
TEST(CpuV4Storage, Fp8EntriesStoreTheRoundedRowsExactly) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  CpuV4Ops ops;
  for (auto [d, rope] : {std::pair<std::int64_t, std::int64_t>{576, 64}, {32, 8}}) {
    const std::int64_t n = 6, nope = d - rope, bytes = V4KvEntryBytes(d, rope);
    EXPECT_EQ(bytes, nope + (nope + 63) / 64 + 2 * rope);
    std::vector<float> rows(n * d);
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t i = 0; i < d; ++i) rows[t * d + i] = normal(rng) * std::pow(10.0f, static_cast<float>(t - 3));
    for (std::int64_t i = 0; i < std::min<std::int64_t>(64, nope); ++i) rows[2 * d + i] = 0.0f;  // a zero block
    rows[4 * d + 1] = 3e4f;
    const std::vector<float> original = rows;
    ops.RoundToStorage(View(rows.data(), DType::kF32, Shape{n, d}), rope);
    for (std::int64_t t = 0; t < n; ++t) {
      for (std::int64_t b = 0; b * 64 < nope; ++b) {
        // Each block's values are codes times one power of two no smaller than amax / 448.
        float amax = 0.0f;
        for (std::int64_t i = b * 64; i < std::min(nope, (b + 1) * 64); ++i)
          amax = std::max(amax, std::fabs(original[t * d + i]));
        int e = 0;
        std::frexp(std::max(amax, 1e-4f) / 448.0f, &e);
        for (std::int64_t i = b * 64; i < std::min(nope, (b + 1) * 64); ++i) {
          const float x = original[t * d + i], r = rows[t * d + i];
          const float scale = std::ldexp(1.0f, e);
          EXPECT_EQ(F8E4M3ToF32(F32ToF8E4M3(r / scale)) * scale, r) << t << " " << i;
          EXPECT_LE(std::fabs(r - x), std::max(std::fabs(x) / 15.0f, scale / 256.0f)) << t << " " << i;
        }
      }
      for (std::int64_t i = nope; i < d; ++i) EXPECT_EQ(rows[t * d + i], Bf16ToF32(F32ToBf16(original[t * d + i])));
    }
    std::vector<std::uint8_t> cache(static_cast<std::size_t>(8 * bytes), 0xAB);
    const std::vector<std::int64_t> slots = {3, -1, 0, 7, 5, 1};
    ops.WriteEntries(View(rows.data(), DType::kF32, Shape{n, d}), slots,
                     View(cache.data(), DType::kU8, Shape{8, bytes}), V4KvFormat::kFp8, rope);
    std::vector<float> back(d);
    for (std::int64_t t = 0; t < n; ++t) {
      if (slots[t] < 0) continue;
      ReadV4Entry(View(cache.data(), DType::kU8, Shape{8, bytes}), slots[t], d, rope, V4KvFormat::kFp8, back.data());
      for (std::int64_t i = 0; i < d; ++i) ASSERT_EQ(back[i], rows[t * d + i]) << "row " << t << " value " << i;
    }
    EXPECT_EQ(cache[2 * bytes], 0xAB);  // slot 2 (the skipped row's) untouched
  }
}

// One HCA window (ratio 4, head_dim 3) and one CSA entry (overlapping: window w-1's first halves
// and window w's second halves), all projections in the step, against a direct softmax.
TEST(CpuV4Compressor, PoolsWindowsBySoftmaxOverSlots) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  CpuV4Ops ops;
  for (bool overlap : {false, true}) {
    CompressorShape sh;
    sh.ratio = 4;
    sh.head_dim = 3;
    sh.overlap = overlap;
    const std::int64_t n = 8, w = sh.width(), d = sh.head_dim, r = sh.ratio;
    std::vector<float> kv(n * w), gate(n * w), ape(r * w), state(2 * sh.state_positions() * 2 * w), pooled(2 * d, 7.0f);
    for (float* v : {kv.data(), gate.data(), ape.data()})
      for (std::int64_t i = 0; i < (v == ape.data() ? r * w : n * w); ++i) v[i] = normal(rng);
    SeqAttention s;
    s.query_start = 0;
    s.query_len = static_cast<std::int32_t>(n);
    s.kv_len = static_cast<std::int32_t>(n);
    s.new_tokens = static_cast<std::int32_t>(n);
    s.state_slot = 0;
    // Positions 4..7 (and 0..3 overlapping), then a place kept for a window that does not close.
    const std::vector<ClosedWindow> windows = {ClosedWindowOf(s, 1), ClosedWindow{}};
    ops.Compress(View(kv.data(), DType::kF32, Shape{n, w}), View(gate.data(), DType::kF32, Shape{n, w}),
                 View(ape.data(), DType::kF32, Shape{r, w}),
                 View(state.data(), DType::kF32, Shape{2 * sh.state_positions(), 2 * w}), windows, sh,
                 View(pooled.data(), DType::kF32, Shape{2, d}));
    for (std::int64_t c = 0; c < d; ++c) EXPECT_EQ(pooled[d + c], 0.0f) << "a place's row is zeros";
    for (std::int64_t c = 0; c < d; ++c) {
      std::vector<std::pair<double, double>> slots;  // (logit, value)
      if (overlap)
        for (std::int64_t j = 0; j < r; ++j) slots.push_back({gate[j * w + c] + ape[j * w + c], kv[j * w + c]});
      const std::int64_t half = overlap ? d : 0;
      for (std::int64_t j = 0; j < r; ++j)
        slots.push_back({gate[(r + j) * w + half + c] + ape[j * w + half + c], kv[(r + j) * w + half + c]});
      double top = -1e30, sum = 0.0, acc = 0.0;
      for (auto& [l, v] : slots) top = std::max(top, l);
      for (auto& [l, v] : slots) sum += std::exp(l - top);
      for (auto& [l, v] : slots) acc += std::exp(l - top) / sum * v;
      EXPECT_NEAR(pooled[c], acc, 1e-6) << (overlap ? "CSA" : "HCA") << " channel " << c;
    }
  }
}

// The mixing matrix comes out doubly stochastic (rows and columns sum to 1 within hc_eps's
// effect), pre and post within their ranges, and the collapse is Σ pre_j · stream_j.
TEST(CpuV4Hyper, MixingIsDoublyStochastic) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  CpuV4Ops ops;
  HyperShape sh;
  sh.mult = 4;
  sh.hidden = 8;
  const std::int64_t n = 3, m = sh.mult, mixes = (2 + m) * m, width = m * sh.hidden;
  std::vector<float> streams(n * width), fn(mixes * width), base(mixes), scale = {1.3f, 0.7f, 2.0f};
  for (float& v : streams) v = normal(rng);
  for (float& v : fn) v = normal(rng) * 0.3f;
  for (float& v : base) v = normal(rng);
  std::vector<float> collapsed(n * sh.hidden), post(n * m), comb(n * m * m);
  ops.HyperPre(View(streams.data(), DType::kF32, Shape{n, m, sh.hidden}), View(fn.data(), DType::kF32, Shape{mixes, width}),
               View(base.data(), DType::kF32, Shape{mixes}), View(scale.data(), DType::kF32, Shape{3}), sh,
               View(collapsed.data(), DType::kF32, Shape{n, sh.hidden}), View(post.data(), DType::kF32, Shape{n, m}),
               View(comb.data(), DType::kF32, Shape{n, m, m}));
  for (std::int64_t t = 0; t < n; ++t) {
    for (std::int64_t j = 0; j < m; ++j) {
      double row = 0, col = 0;
      for (std::int64_t k = 0; k < m; ++k) {
        row += comb[(t * m + j) * m + k];
        col += comb[(t * m + k) * m + j];
      }
      EXPECT_NEAR(row, 1.0, 1e-3) << "token " << t << " row " << j;
      EXPECT_NEAR(col, 1.0, 1e-5) << "token " << t << " column " << j;  // columns are normalised last
      EXPECT_GT(post[t * m + j], 0.0f);
      EXPECT_LT(post[t * m + j], 2.0f);
    }
  }
}

}  // namespace
}  // namespace fission::kernels::cpu
