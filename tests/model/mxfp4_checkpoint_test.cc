// An MXFP4 checkpoint in Quark's layout (tests/fixtures/models/tiny-deepseek-v3-mxfp4, written by
// tools/golden/make_mxfp4_fixture.py) against its bf16 twin, whose weights the script decoded
// itself: the CPU dequantizes MXFP4 exactly at load, so weights and logits must be identical.
#include <gtest/gtest.h>

#include <cstring>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/runtime/model_loader.h"
#include "model/weights.h"
#include "model/step_runner_testlib.h"
#include "tensor/quantize.h"

namespace fission::model {
namespace {

std::string Mxfp4Dir() { return FixtureModelDir("tiny-deepseek-v3-mxfp4"); }

TEST(Mxfp4Checkpoint, ConfigIsQuarkMxfp4WithItsExcludeList) {
  const io::ModelConfig c = io::LoadModelConfig(Mxfp4Dir());
  EXPECT_EQ(c.quantization.method, "quark");
  EXPECT_EQ(c.quantization.activations, "fp4");
  EXPECT_EQ(c.quantization.block_cols, 32);
  EXPECT_NE(std::find(c.quantization.exclude.begin(), c.quantization.exclude.end(), "lm_head"),
            c.quantization.exclude.end());
}

TEST(Mxfp4Checkpoint, WeightsDecodeToTheTwinsValues) {
  const io::Checkpoint mx(Mxfp4Dir()), twin(Mxfp4Dir() + "/bf16-twin");
  int mxfp4 = 0;
  for (const std::string& name : twin.Names()) {
    const Shape shape = twin.Info(name).shape;
    if (mx.IsMxfp4(name)) ++mxfp4;
    const Buffer a = mx.LoadF32(name, shape), b = twin.LoadF32(name, shape);
    ASSERT_EQ(std::memcmp(a.ptr<float>(), b.ptr<float>(), a.tensor().bytes()), 0) << name;
    if (shape.rank() == 2 && shape[1] % 4 == 0) {  // a column slice (a row-parallel rank's) too
      const Buffer ca = mx.LoadF32Cols(name, shape, 2, shape[1] / 2), cb = twin.LoadF32Cols(name, shape, 2, shape[1] / 2);
      ASSERT_EQ(std::memcmp(ca.ptr<float>(), cb.ptr<float>(), ca.tensor().bytes()), 0) << name << " columns";
    }
  }
  EXPECT_EQ(mxfp4, 3 + 3 * (16 + 1));  // the dense MLP, 16 routed and the shared experts
}

TEST(Mxfp4Checkpoint, TheScriptsQuantizerAgreesWithOursByteForByte) {
  const io::Checkpoint source(FixtureModelDir("tiny-deepseek-v3")), mx(Mxfp4Dir());
  for (const char* name : {"model.layers.0.mlp.down_proj.weight", "model.layers.1.mlp.experts.7.gate_proj.weight"}) {
    const Shape shape = source.Info(name).shape;
    const Buffer w = source.LoadF32(name, shape);
    const QuantizedMatrix q = QuantizeMatrix(w.ptr<float>(), shape[0], shape[1], WeightFormat::Mxfp4());
    const Tensor codes = mx.View(name), scales = mx.View(std::string(name) + "_scale");
    ASSERT_EQ(codes.bytes(), q.codes.tensor().bytes()) << name;
    EXPECT_EQ(std::memcmp(codes.data, q.codes.ptr<std::uint8_t>(), codes.bytes()), 0) << name;
    EXPECT_EQ(std::memcmp(scales.data, q.scales.ptr<std::uint8_t>(), scales.bytes()), 0) << name;
  }
}

TEST(Mxfp4Checkpoint, LogitsEqualTheTwins) {
  auto mx = LoadCausalLM(Mxfp4Dir(), LoadOptions{});
  auto twin = LoadCausalLM(Mxfp4Dir() + "/bf16-twin", LoadOptions{});
  const std::vector<std::int32_t> prompt = Tokens(12, 3, 256);
  StepRunner a(*mx, 4, 16, 1), b(*twin, 4, 16, 1);
  const int sa = a.AddSequence(), sb = b.AddSequence();
  const auto ra = a.Prefill(sa, prompt, true), rb = b.Prefill(sb, prompt, true);
  for (std::size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i], rb[i]) << "position " << i;
  EXPECT_EQ(a.Decode(sa, 5), b.Decode(sb, 5));
}

TEST(Mxfp4Checkpoint, AQuarkConfigOtherThanMxfp4IsRefusedNamingTheKeys) {
  const std::string patch =
      R"({"quantization_config": {"global_quant_config": {"weight": {"dtype": "fp8_e4m3", "group_size": 128}}}})";
  try {
    io::LoadModelConfig(Mxfp4Dir(), patch);
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("global_quant_config.weight.dtype"), std::string::npos) << what;
    EXPECT_NE(what.find("global_quant_config.weight.group_size"), std::string::npos) << what;
  }
}

// WeightLoader::KeepMxfp4Experts (what --device cuda sets for a checkpoint with fp4 activations):
// the routed experts keep the stored codes and scales, gate over up stacked, row slices as they
// are, a down slice off the 1x32 groups quantized again from its decoded values; other modules
// are dequantized as before. Checked on the CPU backend, where the weights stay on the host.
TEST(Mxfp4Checkpoint, KeptExpertsAreTheStoredCodes) {
  const io::Checkpoint mx(Mxfp4Dir());
  std::unique_ptr<kernels::Backend> cpu = kernels::MakeCpuBackend();
  WeightLoader loader(&mx, *cpu);
  loader.KeepMxfp4Experts();
  const std::string p = "model.layers.1.mlp.experts.5.";
  const Shape each{32, 64}, down{64, 32};
  auto decoded = [](const Weight& w) {
    std::vector<float> v(w.values.tensor().numel());
    DequantizeMatrix(w.view(), v.data());
    return v;
  };
  for (const Range rows : {Range{}, Range{16, 32}}) {
    const Weight gu = loader.LoadLinearStacked(p + "gate_proj.weight", p + "up_proj.weight", each, rows);
    ASSERT_EQ(gu.format, WeightFormat::Mxfp4());
    const Buffer gate = mx.LoadF32Rows(p + "gate_proj.weight", each, rows.begin, rows.stop(32));
    const Buffer up = mx.LoadF32Rows(p + "up_proj.weight", each, rows.begin, rows.stop(32));
    std::vector<float> want(gate.ptr<float>(), gate.ptr<float>() + gate.tensor().numel());
    want.insert(want.end(), up.ptr<float>(), up.ptr<float>() + up.tensor().numel());
    EXPECT_EQ(decoded(gu), want) << "rows " << rows.begin;
    // The codes are the checkpoint's bytes, not a quantization of their decoded values.
    const Tensor stored = mx.View(p + "gate_proj.weight");
    EXPECT_EQ(std::memcmp(gu.values.ptr<std::uint8_t>(),
                          static_cast<const std::uint8_t*>(stored.data) + rows.begin * 32, gate.tensor().numel() / 2),
              0);
  }
  const Weight whole = loader.LoadLinearCols(p + "down_proj.weight", down, Range{0, 32});
  ASSERT_EQ(whole.format, WeightFormat::Mxfp4());
  const Buffer d = mx.LoadF32(p + "down_proj.weight", down);
  EXPECT_EQ(decoded(whole), std::vector<float>(d.ptr<float>(), d.ptr<float>() + d.tensor().numel()));
  // Columns 0..16 end inside a group: the slice's own scales.
  const Weight half = loader.LoadLinearCols(p + "down_proj.weight", down, Range{0, 16});
  ASSERT_EQ(half.format, WeightFormat::Mxfp4());
  const Buffer hd = mx.LoadF32Cols(p + "down_proj.weight", down, 0, 16);
  const QuantizedMatrix q = QuantizeMatrix(hd.ptr<float>(), 64, 16, WeightFormat::Mxfp4());
  EXPECT_EQ(std::memcmp(half.scales.ptr<std::uint8_t>(), q.scales.ptr<std::uint8_t>(), q.scales.tensor().bytes()), 0);
  // What the metadata says each module keeps: the routed experts their codes, the shared experts
  // and the dense MLP nothing (so a layer's shared MLP is not loaded as experts only to be dropped).
  EXPECT_EQ(loader.KeptFormatOf(p + "gate_proj.weight"), WeightFormat::Mxfp4());
  EXPECT_EQ(loader.KeptFormatOf("model.layers.1.mlp.shared_experts.gate_proj.weight"), std::nullopt);
  EXPECT_EQ(loader.KeptFormatOf("model.layers.0.mlp.gate_proj.weight"), std::nullopt);
  // A down projection after a dequantized gate_up is dequantized too; other modules as before.
  EXPECT_FALSE(loader.LoadLinearCols(p + "down_proj.weight", down, Range{0, 32}, /*allow_fp8=*/false).quantized());
  EXPECT_FALSE(loader.LoadLinearStacked("model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                                        Shape{128, 64})
                   .quantized());
}

}  // namespace
}  // namespace fission::model
