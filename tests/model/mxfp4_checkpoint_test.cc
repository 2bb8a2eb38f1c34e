// An MXFP4 checkpoint in Quark's layout (tests/fixtures/models/tiny-deepseek-v3-mxfp4, written by
// tools/golden/make_mxfp4_fixture.py) against its bf16 twin, whose weights the script decoded
// itself: the CPU dequantizes MXFP4 exactly at load, so weights and logits must be identical.
#include <gtest/gtest.h>

#include <cstring>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/runtime/model_loader.h"
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

}  // namespace
}  // namespace fission::model
