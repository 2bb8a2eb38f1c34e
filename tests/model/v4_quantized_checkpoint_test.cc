// A DeepSeek-V4 checkpoint in the layout DeepSeek publishes it (attention and shared-expert linears
// as e4m3 with a ue8m0 `.scale` per 128x128 block, routed experts as FP4: I8 [rows, cols / 2] of
// e2m1 pairs with a ue8m0 `.scale` per 32 values), written from the tiny fixture
// (v4_quantized_testlib.h), against its twin holding the decoded values in fp32: the CPU dequantizes
// exactly at load, so the logits are identical.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "io/checkpoint.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/v4_quantized_testlib.h"

namespace fission::model {
namespace {

class V4QuantizedCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = V4QuantizedCheckpoints().quantized;
    twin_ = V4QuantizedCheckpoints().twin;
  }

  static std::string dir_, twin_;
};

std::string V4QuantizedCheckpoint::dir_, V4QuantizedCheckpoint::twin_;

TEST_F(V4QuantizedCheckpoint, ScalesAreFoundByDeepSeeksNames) {
  const io::Checkpoint q(dir_);
  EXPECT_EQ(q.Fp8ScaleOf("layers.1.attn.wq_a.weight"), "layers.1.attn.wq_a.scale");
  EXPECT_EQ(q.Fp8ScaleOf("layers.1.attn.wo_a.weight"), "");  // kept in full precision, as published
  EXPECT_TRUE(q.IsMxfp4("layers.2.ffn.experts.5.w2.weight"));
  EXPECT_FALSE(q.IsMxfp4("layers.2.ffn.shared_experts.w2.weight"));  // FP8, not FP4
  const io::Checkpoint twin(twin_);
  for (const char* name : {"layers.3.attn.wq_b.weight", "layers.0.ffn.experts.3.w1.weight", "layers.1.ffn.shared_experts.w3.weight"}) {
    const Shape shape = twin.Info(name).shape;
    const Buffer a = q.LoadF32(name, shape), b = twin.LoadF32(name, shape);
    EXPECT_EQ(std::memcmp(a.ptr<float>(), b.ptr<float>(), a.tensor().bytes()), 0) << name;
  }
}

TEST_F(V4QuantizedCheckpoint, LogitsEqualTheDecodedTwinsOnEveryLayout) {
  auto twin = LoadCausalLM(twin_);
  const auto tokens = Tokens(45, 8, twin->vocab_size());
  StepRunner twin_runner(*twin, 4, 32, 1);
  const auto want = twin_runner.Prefill(twin_runner.AddSequence(), tokens, true);
  for (int tp : {1, 2}) {
    LoadOptions options;
    options.tp_size = tp;
    auto model = LoadCausalLM(dir_, options);
    StepRunner runner(*model, 4, 32, 1);
    const auto got = runner.Prefill(runner.AddSequence(), tokens, true);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t p = 0; p < want.size(); ++p) {
      if (tp == 1) {
        ASSERT_EQ(got[p], want[p]) << "position " << p;
      } else {
        ASSERT_LE(RelativeL2(got[p], want[p].data(), twin->vocab_size()), 1e-5) << "tp 2 position " << p;
      }
    }
  }
}

}  // namespace
}  // namespace fission::model

namespace fission::model {
namespace {

// A hash-routed layer's table holding an expert id outside the experts is refused at load, naming
// the tensor, its row and the id: the kernels index experts by the table without checking it.
TEST(V4HashTable, AnIdOutsideTheExpertsIsRefusedAtLoad) {
  const std::string source = FixtureModelDir("tiny-deepseek-v4");
  const std::string dir = ::testing::TempDir() + "/v4-bad-tid2eid-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(source + "/config.json", dir + "/config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const io::Checkpoint ckpt(source);
  const io::ModelConfig config = io::LoadModelConfig(source);
  std::vector<io::TensorToWrite> tensors;
  std::vector<std::int64_t> table;
  for (const std::string& name : ckpt.Names()) {
    if (name != "layers.0.ffn.gate.tid2eid") {
      tensors.push_back({name, ckpt.View(name)});
      continue;
    }
    const Tensor stored = ckpt.View(name);
    ASSERT_EQ(stored.dtype, DType::kI64) << "the fixture's table";
    table.assign(stored.ptr<std::int64_t>(), stored.ptr<std::int64_t>() + stored.numel());
    table[3 * stored.shape[1] + 1] = config.n_routed_experts;  // row 3: one past the last expert
    Tensor bad = stored;
    bad.data = table.data();
    tensors.push_back({name, bad});
  }
  ASSERT_FALSE(table.empty()) << "the fixture has no hash-routed layer 0";
  io::WriteSafetensors(dir + "/model.safetensors", tensors);
  try {
    LoadCausalLM(dir);
    FAIL() << "a table with an expert id outside the experts was loaded";
  } catch (const Error& e) {
    const std::string want = StrCat("layers.0.ffn.gate.tid2eid' row 3 holds ", config.n_routed_experts, ", outside");
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fission::model
