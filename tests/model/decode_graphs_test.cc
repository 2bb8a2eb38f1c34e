// DecodeGraphs' bookkeeping on the CPU: a backend that "captures" by keeping the step and
// "replays" by running it again on the CPU backend (model/replaying_backend.h). The replayed step reads the graph's input
// block exactly as a CUDA replay's kernels read its device copy, so the layout, padding rows
// (KV slot -1), size choice, logits rows, memory changes and the fallback after a failed capture
// are all checked here against eager steps, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/arch/deepseek_v3.h"
#include "model/replaying_backend.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/weights.h"

namespace fission::model {
namespace {

class DecodeGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = FixtureModelDir("tiny-deepseek-v3");
    checkpoint_ = std::make_unique<io::Checkpoint>(dir);
    ShardOptions options;
    options.cuda_graphs.batch_sizes = {2, 4};
    WeightLoader loader(checkpoint_.get(), backend_);
    graphs_ = std::make_unique<DeepseekV3Model>(io::LoadModelConfig(dir), loader, options);
    eager_ = LoadCausalLM(dir);
  }

  // Prefills `lengths`, then runs `batches` (sequence indices) `rounds` times in both models,
  // feeding both the eager model's greedy tokens; every row must be bit-identical.
  // With `capture_first`, every graph is captured before the first step (the engine's start-up).
  void DecodeBoth(const std::vector<int>& lengths, const std::vector<std::vector<int>>& batches, int rounds,
                  std::int64_t pages = 96, bool capture_first = false) {
    StepRunner a(*graphs_, 4, pages, 5), b(*eager_, 4, pages, 5);
    if (capture_first) {
      graphs_->CaptureDecodeGraphs(0);
      EXPECT_EQ(backend_.captures, 2);  // sizes 4 and 2, before any step
    }
    std::vector<std::int32_t> next;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      const auto prompt = Tokens(lengths[i], 40 + i, eager_->vocab_size());
      a.Prefill(a.AddSequence(), prompt, false);
      next.push_back(Argmax(b.Prefill(b.AddSequence(), prompt, false).back()));
    }
    DecodeBothBitIdentical(a, b, batches, rounds, next);
  }

  ReplayingBackend backend_;
  std::unique_ptr<io::Checkpoint> checkpoint_;
  std::unique_ptr<DeepseekV3Model> graphs_;
  std::unique_ptr<CausalLM> eager_;
};

TEST_F(DecodeGraphsTest, ReplaysEqualEagerStepsAndPadToTheNextSize) {
  // Batches of 4 and 2 (captured sizes), 3 and 1 (padded to 4 and 2); contexts cross pages.
  DecodeBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}, {0, 2, 3}, {2}}, 6);
  EXPECT_EQ(backend_.captures, 2);    // sizes 4 and 2, each once (on padding rows)
  EXPECT_EQ(backend_.replays, 4 * 6);  // then every decode step is a replay
}

TEST_F(DecodeGraphsTest, LargerBatchesAndPrefillStepsRunEagerly) {
  DecodeBoth({5, 2, 7, 4, 11}, {{0, 1, 2, 3, 4}}, 3);  // 5 rows: over the largest size
  EXPECT_EQ(backend_.captures, 0);
  StepRunner a(*graphs_, 4, 64, 1);
  a.Step({{a.AddSequence(), Tokens(6, 1, graphs_->vocab_size())}, {a.AddSequence(), {5}}});  // a prefill chunk
  EXPECT_EQ(backend_.captures, 0);
}

TEST_F(DecodeGraphsTest, AFailedCaptureFallsBackToEagerSteps) {
  backend_.fail_captures = true;
  DecodeBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}}, 2);
  // Size 4 failed (sizes >= 4 off), then size 2 failed too; every step ran eagerly and no size is
  // tried again.
  EXPECT_EQ(backend_.captures, 2);
  EXPECT_EQ(backend_.replays, 0);
}

TEST_F(DecodeGraphsTest, NewMemoryGetsNewGraphs) {
  DecodeBoth({3, 9}, {{0, 1}}, 2);
  EXPECT_EQ(backend_.captures, 1);
  DecodeBoth({4, 1}, {{0, 1}}, 2, 80);  // the memory allocated again
  EXPECT_EQ(backend_.captures, 2);
}

TEST_F(DecodeGraphsTest, CaptureAtStartUpCoversEverySize) {
  DecodeBoth({3, 9, 14}, {{0, 1, 2}, {1}}, 2, 96, /*capture_first=*/true);
  EXPECT_EQ(backend_.captures, 2);  // no capture once steps run
  EXPECT_EQ(backend_.replays, 4);
}

TEST(DecodeGraphSizes, DefaultsAndFlags) {
  EXPECT_EQ(DefaultCudaGraphSizes(48), (std::vector<int>{1, 2, 4, 8, 12, 16, 24, 32, 40, 48}));
  EXPECT_EQ(DefaultCudaGraphSizes(10), (std::vector<int>{1, 2, 4, 8, 10}));
  EXPECT_EQ(DefaultCudaGraphSizes(0).back(), 256);
  CudaGraphOptions o;
  o.batch_sizes = {8, 2, 8, 300};
  o.max_batch_size = 64;
  EXPECT_EQ(CudaGraphSizes(o), (std::vector<int>{2, 8}));
  o.disabled = true;
  EXPECT_TRUE(CudaGraphSizes(o).empty());
}

}  // namespace
}  // namespace fission::model
