// DeepSeek-V4's decode steps as graph replays on the CPU's replaying backend
// (model/replaying_backend.h): a replay reads its step plan (model/layers/v4_step_plan.h) from the
// graph's input block as a CUDA replay's kernels read its device copy, so every ring slot, closed
// window and query row a replay uses must have been written there for that step. Replays equal
// eager steps bit for bit across the sliding window's ring, CSA and HCA windows closing mid-batch,
// and padded batches.
#include <gtest/gtest.h>

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/arch/deepseek_v4.h"
#include "model/replaying_backend.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/weights.h"

namespace fission::model {
namespace {

TEST(V4Graphs, ReplaysEqualEagerStepsAcrossWindowsAndPadding) {
  const std::string dir = FixtureModelDir("tiny-deepseek-v4");  // window 8, CSA ratio 4, HCA ratio 16
  ReplayingBackend backend;
  io::Checkpoint checkpoint(dir);
  ShardOptions options;
  options.cuda_graphs.batch_sizes = {2, 4};
  WeightLoader loader(&checkpoint, backend);
  DeepseekV4Model graphs(io::LoadModelConfig(dir), loader, options);
  const std::unique_ptr<CausalLM> eager = LoadCausalLM(dir);

  StepRunner a(graphs, 4, 128, 5), b(*eager, 4, 128, 5);
  const std::vector<int> lengths = {3, 17, 30, 9};  // every position mod 4 and 16 as decode goes on
  std::vector<std::int32_t> next;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    const auto prompt = Tokens(lengths[i], 60 + i, eager->vocab_size());
    a.Prefill(a.AddSequence(), prompt, false);
    next.push_back(Argmax(b.Prefill(b.AddSequence(), prompt, false).back()));
  }
  // Sizes 4 and 2 as they are, 3 and 1 padded; 40 rounds cross the ring and HCA windows.
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3}, {1, 3}, {0, 2, 3}, {2}};
  DecodeBothBitIdentical(a, b, batches, 20, next);
  EXPECT_EQ(backend.captures, 2);  // sizes 4 and 2, on padding rows
  EXPECT_EQ(backend.replays, 4 * 20);
}

}  // namespace
}  // namespace fission::model
