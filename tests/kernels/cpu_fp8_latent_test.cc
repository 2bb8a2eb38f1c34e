// The FP8 latent cache of the CPU reference (--kv-cache-dtype fp8_e4m3; kernels/mla_ops.h): the
// stored layout (e4m3 codes, one scale per 128 values, bf16 rope), and MLA over it equal to MLA
// over the same rows decoded into an fp32 cache.
#include <gtest/gtest.h>

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

MlaShape Shape300() {
  MlaShape sh;
  sh.num_heads = 2;
  sh.qk_nope_head_dim = 8;
  sh.qk_rope_head_dim = 6;
  sh.v_head_dim = 8;
  sh.kv_lora_rank = 300;  // two whole groups of 128 and a partial one
  sh.softmax_scale = 0.2f;
  sh.page_size = 4;
  sh.latent_format = LatentFormat::kFp8;
  return sh;
}

TEST(CpuFp8Latent, StoresCodesScalesAndBf16Rope) {
  const MlaShape sh = Shape300();
  EXPECT_EQ(LatentEntryBytes(512, 64), 656);  // DeepSeek's 512 + 64: FlashMLA's layout
  const std::int64_t width = 306, bytes = LatentEntryBytes(300, 6);
  ASSERT_EQ(bytes, 300 + 12 + 12);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> rows(2 * width);
  for (float& v : rows) v = normal(rng);
  std::vector<std::uint8_t> cache(3 * bytes, 0);
  const std::vector<std::int64_t> slots = {2, 0};
  WriteLatent(View(rows.data(), DType::kF32, Shape{2, width}), slots, View(cache.data(), DType::kU8, Shape{3, bytes}), sh);
  for (int i = 0; i < 2; ++i) {
    const float* row = &rows[i * width];
    const std::uint8_t* e = &cache[slots[i] * bytes];
    for (int g = 0; g < 3; ++g) {
      float amax = 0.0f, scale;
      for (int j = g * 128; j < std::min(300, (g + 1) * 128); ++j) amax = std::max(amax, std::fabs(row[j]));
      std::memcpy(&scale, e + 300 + 4 * g, 4);
      EXPECT_FLOAT_EQ(scale, amax / 448.0f) << "row " << i << " group " << g;
      for (int j = g * 128; j < std::min(300, (g + 1) * 128); ++j)
        EXPECT_LE(std::fabs(F8E4M3ToF32(e[j]) * scale - row[j]), std::fabs(row[j]) / 16.0f + scale / 512.0f);
    }
    for (int j = 0; j < 6; ++j) {
      std::uint16_t bits;
      std::memcpy(&bits, e + 312 + 2 * j, 2);
      float back;
      ConvertToF32(DType::kBF16, &bits, &back, 1);
      EXPECT_LE(std::fabs(back - row[300 + j]), std::fabs(row[300 + j]) / 128.0f) << "rope " << j;
    }
  }
  for (std::int64_t j = 0; j < bytes; ++j) EXPECT_EQ(cache[1 * bytes + j], 0) << "slot 1 was not written";
}

// Both forms read the fp8 rows directly and give exactly what they give over the decoded rows.
TEST(CpuFp8Latent, AttentionEqualsAttentionOverTheDecodedRows) {
  const MlaShape fp8 = Shape300();
  MlaShape exact = fp8;
  exact.latent_format = LatentFormat::kExact;
  const std::int64_t width = 306, bytes = LatentEntryBytes(300, 6), slots = 24, n = 3;
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> rows(slots * width), q(n * 2 * 14), kv_b(2 * 16 * 300);
  for (auto* v : {&rows, &q, &kv_b})
    for (float& x : *v) x = normal(rng);
  std::vector<std::uint8_t> cache(slots * bytes);
  std::vector<std::int64_t> all(slots);
  std::iota(all.begin(), all.end(), 0);
  WriteLatent(View(rows.data(), DType::kF32, Shape{slots, width}), all, View(cache.data(), DType::kU8, Shape{slots, bytes}),
              fp8);
  // The decoded rows: what attention over the fp8 cache must see.
  std::vector<float> decoded(slots * width);
  for (std::int64_t s = 0; s < slots; ++s) {
    const std::uint8_t* e = &cache[s * bytes];
    ConvertToF32(DType::kF8E4M3, e, &decoded[s * width], 300);
    for (int j = 0; j < 300; ++j) {
      float scale;
      std::memcpy(&scale, e + 300 + 4 * (j / 128), 4);
      decoded[s * width + j] *= scale;
    }
    ConvertToF32(DType::kBF16, e + 312, &decoded[s * width + 300], 6);
  }
  const std::vector<std::int32_t> table = {5, 1, 3, 0, 2, 4}, positions = {0, 11, 22};
  SeqAttention seq;
  seq.query_len = 3;
  seq.kv_len = 23;
  seq.query_positions = positions;
  seq.block_table = table;
  for (bool absorbed : {false, true}) {
    std::vector<float> got(n * 2 * 8), want(n * 2 * 8);
    const Tensor qt = View(q.data(), DType::kF32, Shape{n, 2, 14}), kvb = View(kv_b.data(), DType::kF32, Shape{32, 300});
    auto run = [&](const Tensor& c, const MlaShape& sh, std::vector<float>& out) {
      const Tensor o = View(out.data(), DType::kF32, Shape{n, 2, 8});
      if (absorbed) {
        MlaAttentionAbsorbed(qt, c, kvb, {&seq, 1}, sh, o);
      } else {
        MlaAttentionExpanded(qt, c, kvb, {&seq, 1}, sh, o);
      }
    };
    run(View(cache.data(), DType::kU8, Shape{slots, bytes}), fp8, got);
    run(View(decoded.data(), DType::kF32, Shape{slots, width}), exact, want);
    EXPECT_EQ(got, want) << (absorbed ? "absorbed" : "expanded");
  }
}

}  // namespace
}  // namespace fission::kernels::cpu
