// FP8 weights kept as stored (what a device does with an FP8 checkpoint), run here through the CPU
// backend's Linear and MoeExperts on FP8 block weights: the loader's block-aligned slices and its dequantized
// fallback, dummy FP8 statistics, and the whole model against the dequantized reference (the
// golden logits of tests/fixtures/models/tiny-deepseek-v3-fp8).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/arch/deepseek_v3.h"
#include "model/fp8_testlib.h"
#include "model/step_runner_testlib.h"
#include "model/weights.h"

namespace fission::model {
namespace {

std::vector<float> Values(const Weight& w) {
  const Tensor& t = w.values.tensor();
  std::vector<float> out(t.numel());
  if (!w.quantized()) {
    std::copy(t.ptr<float>(), t.ptr<float>() + t.numel(), out.begin());
    return out;
  }
  return DequantizeFp8(t, w.scales.tensor());
}

std::vector<float> Values(const Buffer& b) { return {b.ptr<float>(), b.ptr<float>() + b.tensor().numel()}; }

class Fp8Loader : public ::testing::Test {
 protected:
  const std::string dir_ = FixtureModelDir("tiny-deepseek-v3-fp8");
  io::Checkpoint checkpoint_{dir_};
  std::unique_ptr<kernels::Backend> cpu_ = kernels::MakeCpuBackend();
};

TEST_F(Fp8Loader, AlignedSlicesStayFp8AndDequantizeToTheCheckpointValues) {
  WeightLoader loader(&checkpoint_, *cpu_);
  loader.KeepFp8();
  const std::string q_b = "model.layers.0.self_attn.q_b_proj.weight", kv_a = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight";
  const std::string p = "model.layers.0.mlp.";
  // A row slice on block boundaries; a whole matrix with a partial last block (192 rows).
  Weight rows = loader.LoadLinear(q_b, Shape{256, 128}, {128, 256});
  ASSERT_TRUE(rows.quantized());
  EXPECT_EQ(rows.values.tensor().dtype, DType::kF8E4M3);
  EXPECT_EQ(rows.scales.tensor().shape, (Shape{1, 1}));
  EXPECT_EQ(Values(rows), Values(checkpoint_.LoadF32Rows(q_b, Shape{256, 128}, 128, 256)));
  Weight whole = loader.LoadLinear(kv_a, Shape{192, 256});
  ASSERT_TRUE(whole.quantized());
  EXPECT_EQ(whole.scales.tensor().shape, (Shape{2, 2}));
  EXPECT_EQ(Values(whole), Values(checkpoint_.LoadF32(kv_a, Shape{192, 256})));
  // A column slice, and gate over up stacked (scales stacked with them).
  Weight cols = loader.LoadLinearCols(p + "down_proj.weight", Shape{256, 256}, {128, 256});
  ASSERT_TRUE(cols.quantized());
  EXPECT_EQ(cols.scales.tensor().shape, (Shape{2, 1}));
  EXPECT_EQ(Values(cols), Values(checkpoint_.LoadF32Cols(p + "down_proj.weight", Shape{256, 256}, 128, 256)));
  Weight stacked = loader.LoadLinearStacked(p + "gate_proj.weight", p + "up_proj.weight", Shape{256, 256}, {128, 256});
  ASSERT_TRUE(stacked.quantized());
  EXPECT_EQ(stacked.scales.tensor().shape, (Shape{2, 2}));
  EXPECT_EQ(Values(stacked),
            Values(loader.LoadStacked(p + "gate_proj.weight", p + "up_proj.weight", Shape{256, 256}, {128, 256})));
}

// MLA's q_a_proj over kv_a_proj_with_mqa (one product for both latents): parts of other heights
// stack as stored when the first ends on a block boundary, and not at all when a block would
// straddle the two (the model then loads them apart).
TEST_F(Fp8Loader, PartsOfOtherHeightsStackAsStoredOrNotAtAll) {
  const std::string attn = "model.layers.0.self_attn.";
  const std::vector<StackedPart> parts{{attn + "q_a_proj.weight", Shape{128, 256}},
                                       {attn + "kv_a_proj_with_mqa.weight", Shape{192, 256}}};
  std::vector<float> want = Values(checkpoint_.LoadF32(parts[0].name, parts[0].shape));
  const std::vector<float> kv_a = Values(checkpoint_.LoadF32(parts[1].name, parts[1].shape));
  want.insert(want.end(), kv_a.begin(), kv_a.end());
  WeightLoader loader(&checkpoint_, *cpu_);
  loader.KeepFp8();
  std::optional<Weight> stacked = loader.LoadLinearStacked(parts);
  ASSERT_TRUE(stacked.has_value());
  ASSERT_TRUE(stacked->quantized());
  EXPECT_EQ(stacked->values.tensor().shape, (Shape{320, 256}));
  EXPECT_EQ(stacked->scales.tensor().shape, (Shape{3, 2}));
  EXPECT_EQ(Values(*stacked), want);
  // Rows 0..64 of q_a first: kv_a would start inside the stacked matrix's first block.
  EXPECT_FALSE(loader.LoadLinearStacked({{parts[0].name, parts[0].shape, {0, 64}}, parts[1]}).has_value());
  WeightLoader plain(&checkpoint_, *cpu_);
  std::optional<Weight> dequantized = plain.LoadLinearStacked(parts);
  ASSERT_TRUE(dequantized.has_value());
  EXPECT_FALSE(dequantized->quantized());
  EXPECT_EQ(Values(*dequantized), want);
}

TEST_F(Fp8Loader, UnalignedSlicesFallBackToDequantizedValues) {
  WeightLoader loader(&checkpoint_, *cpu_);
  loader.KeepFp8();
  const std::string q_b = "model.layers.0.self_attn.q_b_proj.weight", p = "model.layers.0.mlp.";
  Weight rows = loader.LoadLinear(q_b, Shape{256, 128}, {64, 192});
  EXPECT_FALSE(rows.quantized());
  EXPECT_EQ(rows.values.tensor().dtype, DType::kF32);
  EXPECT_EQ(Values(rows), Values(checkpoint_.LoadF32Rows(q_b, Shape{256, 128}, 64, 192)));
  Weight cols = loader.LoadLinearCols(p + "down_proj.weight", Shape{256, 256}, {0, 64});
  EXPECT_FALSE(cols.quantized());
  EXPECT_EQ(Values(cols), Values(checkpoint_.LoadF32Cols(p + "down_proj.weight", Shape{256, 256}, 0, 64)));
  // Whole blocks, but the up half would start inside a block of the stacked matrix.
  Weight stacked = loader.LoadLinearStacked(p + "gate_proj.weight", p + "up_proj.weight", Shape{256, 256}, {128, 192});
  EXPECT_FALSE(stacked.quantized());
  EXPECT_EQ(Values(stacked),
            Values(loader.LoadStacked(p + "gate_proj.weight", p + "up_proj.weight", Shape{256, 256}, {128, 192})));
  // Without KeepFp8 nothing is kept, and a matrix stored in bf16 is never FP8.
  WeightLoader plain(&checkpoint_, *cpu_);
  EXPECT_FALSE(plain.LoadLinear(q_b, Shape{256, 128}).quantized());
  EXPECT_FALSE(loader.LoadLinear("lm_head.weight", Shape{512, 256}).quantized());
}

TEST(Fp8DummyWeights, HaveTheStandardDeviationOfTheOtherDummyMatrices) {
  auto cpu = kernels::MakeCpuBackend();
  WeightLoader loader(nullptr, *cpu, /*seed=*/5);
  loader.KeepFp8();
  const std::int64_t m = 384, k = 1024;
  Weight w = loader.LoadLinear("w", Shape{m, k});
  ASSERT_TRUE(w.quantized());
  EXPECT_EQ(w.scales.tensor().shape, (Shape{3, 8}));
  const std::vector<float> v = Values(w);
  double sum = 0, sum_sq = 0;
  for (float x : v) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
  }
  const double mean = sum / v.size(), sd = std::sqrt(sum_sq / v.size() - mean * mean);
  const double want = 1.0 / std::sqrt(static_cast<double>(k));
  EXPECT_NEAR(sd, want, 0.02 * want);
  EXPECT_NEAR(mean, 0.0, 0.02 * want);
}

// The whole tiny FP8 model with its FP8 matrices kept, on the CPU's FP8 operations, against the
// dequantized fp32 reference (transformers' golden logits, which the CPU matches to 1e-6).
TEST(Fp8Model, StaysWithinTheActivationQuantizationBoundOfTheDequantizedModel) {
  const std::string dir = FixtureModelDir("tiny-deepseek-v3-fp8");
  io::Checkpoint checkpoint(dir);
  auto cpu = kernels::MakeCpuBackend();
  auto model = LoadKeptFp8(dir, checkpoint, *cpu);
  const Fp8Comparison r = CompareWithGolden(*model, dir);
  std::printf("FP8 kept (CPU ops) vs dequantized: median relative L2 %.3g, worst %.3g, %d of %d rows above %.2g; "
              "greedy %d of %d decode steps agree\n",
              r.median, r.worst, r.outliers, r.rows, kFp8Typical, r.greedy_same, r.greedy_steps);
  EXPECT_LE(r.median, kFp8MedianBound);
  EXPECT_LE(r.outliers, kFp8OutlierFraction * r.rows);
  EXPECT_GE(r.greedy_same, kFp8GreedyFraction * r.greedy_steps);
}

}  // namespace
}  // namespace fission::model
