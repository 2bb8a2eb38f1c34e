// DeepSeek-V4's FP4 routed experts kept as stored (WeightFormat::Mxfp4A8), on the CPU: the
// loader's decision for --device cuda (DecideV4ExpertsOnCuda: from the config and the options, no
// device needed), the WeightLoader keeping them (codes and scales as stored, dummy ones drawn in the
// format), and a model whose experts are kept computing its decoded twin's logits up to the e4m3
// quantization of the experts' activations, which the twin (dequantized at load) does not do. The
// device runs the same loading in tests/model_cuda/v4_fp4_cuda_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/arch/deepseek_v4.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/v4_quantized_testlib.h"
#include "model/weights.h"
#include "tensor/quantize.h"

namespace fission::model {
namespace {

LoadOptions Options(const std::string& dtype = "auto", int tp = 1, const std::string& load_format = "auto") {
  LoadOptions o;
  o.dtype = dtype;
  o.tp_size = tp;
  o.load_format = load_format;
  return o;
}

TEST(V4Fp4Experts, TheConfigDeclaresFp4ExpertsAtTheTopOrInItsQuantizationConfig) {
  const V4QuantizedDirs& dirs = V4QuantizedCheckpoints();
  EXPECT_EQ(io::LoadModelConfig(dirs.quantized).quantization.expert_dtype, "fp4");
  EXPECT_EQ(io::LoadModelConfig(dirs.twin).quantization.expert_dtype, "");
  const io::ModelConfig nested =
      io::LoadModelConfig(dirs.quantized, R"({"expert_dtype": null, "quantization_config": {"expert_dtype": "fp4"}})");
  EXPECT_EQ(nested.quantization.expert_dtype, "fp4");
  EXPECT_EQ(nested.quantization.method, "fp8");
}

TEST(V4Fp4Experts, TheDeviceKeepsThemUnlessAskedForExactWeightsOrTheShapesDoNotFit) {
  const V4QuantizedDirs& dirs = V4QuantizedCheckpoints();
  const io::ModelConfig fp4 = io::LoadModelConfig(dirs.quantized), plain = io::LoadModelConfig(dirs.twin);
  // The tiny fixture: hidden 64, moe_intermediate 32.
  ASSERT_EQ(fp4.hidden_size, 64);
  ASSERT_EQ(fp4.moe_intermediate_size, 32);
  EXPECT_TRUE(DecideV4ExpertsOnCuda(fp4, Options()).keep);
  EXPECT_TRUE(DecideV4ExpertsOnCuda(fp4, Options("bfloat16")).keep);
  // A real checkpoint keeps whatever it stores as FP4, declared or not (the tensors decide).
  EXPECT_TRUE(DecideV4ExpertsOnCuda(plain, Options()).keep);

  const V4ExpertsOnCuda exact = DecideV4ExpertsOnCuda(fp4, Options("float32"));
  EXPECT_FALSE(exact.keep);
  EXPECT_FALSE(exact.warn);
  EXPECT_NE(exact.why.find("--dtype float32"), std::string::npos) << exact.why;

  // TP 2: each rank holds 16 intermediate units, half a 1x32 group.
  const V4ExpertsOnCuda split = DecideV4ExpertsOnCuda(fp4, Options("auto", 2));
  EXPECT_FALSE(split.keep);
  EXPECT_TRUE(split.warn);
  EXPECT_NE(split.why.find("multiples of 32"), std::string::npos) << split.why;

  // Dummy weights: FP4 experts only when the config declares them; else drawn as before, silently.
  EXPECT_TRUE(DecideV4ExpertsOnCuda(fp4, Options("auto", 1, "dummy")).keep);
  const V4ExpertsOnCuda undeclared = DecideV4ExpertsOnCuda(plain, Options("auto", 1, "dummy"));
  EXPECT_FALSE(undeclared.keep);
  EXPECT_TRUE(undeclared.why.empty()) << undeclared.why;

  EXPECT_FALSE(DecideV4ExpertsOnCuda(io::LoadModelConfig(FixtureModelDir("tiny-deepseek-v3")), Options()).keep);
}

// Host fp32 values of a kept weight.
std::vector<float> Decoded(const Weight& w) {
  std::vector<float> out(static_cast<std::size_t>(w.values.tensor().numel()));
  DequantizeMatrix(w.view(), out.data());
  return out;
}

TEST(V4Fp4Experts, TheLoaderKeepsTheRoutedExpertsAsStored) {
  const V4QuantizedDirs& dirs = V4QuantizedCheckpoints();
  const io::Checkpoint checkpoint(dirs.quantized), twin(dirs.twin);
  auto backend = kernels::MakeCpuBackend();
  WeightLoader loader(&checkpoint, *backend);
  loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
  const std::string p = "layers.1.ffn.experts.5.";
  const Shape up{32, 64}, down{64, 32};
  const Weight gu = loader.LoadLinearStacked(p + "w1.weight", p + "w3.weight", up);
  const Weight dn = loader.LoadLinearCols(p + "w2.weight", down, {}, gu.quantized());
  for (const Weight* w : {&gu, &dn}) {
    ASSERT_EQ(w->format, WeightFormat::Mxfp4A8());
    EXPECT_EQ(w->values.tensor().dtype, DType::kF4E2M1);
    EXPECT_EQ(w->scales.tensor().dtype, DType::kE8M0);
  }
  EXPECT_EQ(gu.values.tensor().shape, (Shape{64, 64}));
  EXPECT_EQ(gu.scales.tensor().shape, (Shape{64, 2}));
  EXPECT_EQ(dn.scales.tensor().shape, (Shape{64, 1}));
  // The codes decode to the twin's values, gate over up.
  const Buffer w1 = twin.LoadF32(p + "w1.weight", up), w3 = twin.LoadF32(p + "w3.weight", up),
               w2 = twin.LoadF32(p + "w2.weight", down);
  const std::vector<float> g = Decoded(gu), d = Decoded(dn);
  for (std::int64_t i = 0; i < 32 * 64; ++i) {
    ASSERT_EQ(g[i], w1.ptr<float>()[i]) << i;
    ASSERT_EQ(g[32 * 64 + i], w3.ptr<float>()[i]) << i;
    ASSERT_EQ(d[i], w2.ptr<float>()[i]) << i;
  }
  // The shared expert is FP8 in the checkpoint, not FP4: dequantized as before.
  const std::string s = "layers.1.ffn.shared_experts.";
  EXPECT_FALSE(loader.LoadLinearStacked(s + "w1.weight", s + "w3.weight", up).quantized());
}

// With the routed experts kept, the CPU's products quantize the experts' activations to e4m3 per
// 1x128 (up to 2^-4 relative per element) and otherwise give the decoded twin's logits: the median
// position within 5e-2 relative L2 (a position whose router flips an expert lands further off, so
// the worst is printed), and not the twin's bits (the quantization ran).
TEST(V4Fp4Experts, AModelWithKeptExpertsIsItsDecodedTwinUpToE4m3Activations) {
  const V4QuantizedDirs& dirs = V4QuantizedCheckpoints();
  auto twin = LoadCausalLM(dirs.twin);
  const io::Checkpoint checkpoint(dirs.quantized);
  auto backend = kernels::MakeCpuBackend();
  WeightLoader loader(&checkpoint, *backend);
  loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
  DeepseekV4Model kept(io::LoadModelConfig(dirs.quantized), loader, ShardOptions{});
  const auto tokens = Tokens(45, 8, twin->vocab_size());
  StepRunner twin_runner(*twin, 4, 32, 1);
  const auto want = twin_runner.Prefill(twin_runner.AddSequence(), tokens, true);
  StepRunner runner(kept, 4, 32, 1);
  const auto got = runner.Prefill(runner.AddSequence(), tokens, true);
  ASSERT_EQ(got.size(), want.size());
  std::vector<double> errors;
  bool same_bits = true;
  for (std::size_t i = 0; i < want.size(); ++i) {
    errors.push_back(RelativeL2(got[i], want[i].data(), twin->vocab_size()));
    same_bits = same_bits && got[i] == want[i];
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  std::printf("kept FP4 experts (e4m3 activations) vs the decoded twin: median relative L2 %.3g, worst %.3g over %zu "
              "positions\n", median, errors.back(), errors.size());
  EXPECT_LT(median, 5e-2);
  EXPECT_FALSE(same_bits) << "the experts' activations were not quantized";
}

// Dummy experts are drawn in the kept format (here on the host: the CPU backend has no device fill)
// with the other dummy matrices' spread, and a dummy model with them runs.
TEST(V4Fp4Experts, DummyExpertsAreDrawnInTheKeptFormat) {
  const V4QuantizedDirs& dirs = V4QuantizedCheckpoints();
  auto backend = kernels::MakeCpuBackend();
  WeightLoader loader(nullptr, *backend, 7);
  loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
  const Weight gu = loader.LoadLinearStacked("layers.0.ffn.experts.1.w1.weight", "layers.0.ffn.experts.1.w3.weight",
                                             Shape{32, 64});
  ASSERT_EQ(gu.format, WeightFormat::Mxfp4A8());
  EXPECT_EQ(gu.values.tensor().shape, (Shape{64, 64}));
  const std::vector<float> v = Decoded(gu);
  double sum_sq = 0;
  for (float x : v) sum_sq += static_cast<double>(x) * x;
  const double stddev = std::sqrt(sum_sq / static_cast<double>(v.size()));
  EXPECT_NEAR(stddev, 1.0 / 8.0, 0.25 / 8.0);  // 1 / sqrt(fan_in 64), within e2m1's rounding

  WeightLoader model_loader(nullptr, *backend, 7);
  model_loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
  DeepseekV4Model model(io::LoadModelConfig(dirs.quantized), model_loader, ShardOptions{});
  StepRunner runner(model, 4, 32, 1);
  const auto rows = runner.Prefill(runner.AddSequence(), Tokens(9, 3, model.vocab_size()), true);
  for (const auto& row : rows)
    for (float x : row) ASSERT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace fission::model
