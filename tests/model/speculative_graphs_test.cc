// Speculative decoding's captured steps on the CPU (model/replaying_backend.h): verify runs (every
// sequence its last token and S drafts, all rows returning logits) and the draft layer's chained
// steps (one row per sequence) run as graph replays at the captured sizes and padded to them; a
// replay gives the eager step's bits, the hidden rows it keeps feed the next draft step exactly as
// an eager step's do, and batches a graph does not take run eagerly.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/replaying_backend.h"
#include "model/runtime/model_loader.h"
#include "model/spec_driver_testlib.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

constexpr std::int32_t kPage = 4;
constexpr std::int32_t kPagesPerSequence = 24;

void ExpectSameRows(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                    const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t r = 0; r < got.size(); ++r) EXPECT_EQ(got[r], want[r]) << what << ", row " << r;
}

class SpeculativeGraphsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShardOptions options;
    options.cuda_graphs.batch_sizes = {2, 4};
    options.load_draft = true;
    replayed_ = LoadReplayed(FixtureModelDir("tiny-deepseek-v3"), options);
    LoadOptions eager;
    eager.load_draft = true;
    eager_ = LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), eager);
  }
  ReplayingBackend& backend() { return replayed_->backend; }
  CausalLM& graphs() { return *replayed_->model; }

  // SpeculateBoth (model/spec_driver_testlib.h) with every row bit-identical.
  void SpeculateBoth(const std::vector<int>& lengths, const std::vector<std::vector<int>>& batches, int rounds,
                     int drafts) {
    model::SpeculateBoth(graphs(), *eager_, lengths, batches, rounds, drafts,
                         [](const LogitRows& got, const LogitRows& want, std::size_t, const std::string& what) {
                           ExpectSameRows(got, want, what);
                         });
  }

  std::unique_ptr<ReplayedModel> replayed_;
  std::unique_ptr<CausalLM> eager_;
};

TEST_F(SpeculativeGraphsTest, VerifyAndDraftStepsReplayEagerBitsAndPad) {
  // Batches of 4 and 2 (captured sizes), 3 and 1 (padded to 4 and 2); contexts cross pages.
  SpeculateBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}, {0, 2, 3}, {2}}, 4, 3);
  // Decode, verify and draft graphs of sizes 4 and 2, each captured once; then every verify run
  // and every chained draft step (two a round and batch) is a replay, and so is the extend of a
  // run that kept no draft (one row a sequence: round 0's four batches).
  EXPECT_EQ(backend().captures, 6);
  EXPECT_EQ(backend().replays, 4 * 4 * (1 + 2) + 4);
}

TEST_F(SpeculativeGraphsTest, OneDraftHasNoChainedSteps) {
  SpeculateBoth({5, 2, 11}, {{0, 1, 2}, {2, 0}}, 3, 1);
  // Decode and verify runs of 2 tokens at sizes 4 and 2 at start-up, then draft graphs for the
  // extends of runs that kept no draft (rounds 0 and 2).
  EXPECT_EQ(backend().captures, 6);
  EXPECT_EQ(backend().replays, 2 * 3 + 2 * 2);
}

TEST_F(SpeculativeGraphsTest, CaptureAtStartUpCoversEverySet) {
  graphs().AllocateMemory({4 * kPagesPerSequence, kPage, 0});
  graphs().CaptureDecodeGraphs(3);
  // Decode, verify (4 tokens a sequence) and draft graphs, sizes 4 and 2 each.
  EXPECT_EQ(backend().captures, 6);
  // A new memory drops them, and they are made again as batches need them: verify runs of 4
  // tokens (what the engine announced), not those of other lengths.
  SpecDriver a(graphs(), 4, kPage, kPagesPerSequence), b(*eager_, 4, kPage, kPagesPerSequence);
  for (int s = 0; s < 4; ++s) {
    const std::vector<std::int32_t> prompt = Tokens(3 + s, 90 + s, eager_->vocab_size());
    ExpectSameRows(a.Target({{s, prompt}}, false), b.Target({{s, prompt}}, false), "prefill");
    std::vector<std::int32_t> known = prompt;
    known.push_back(17);
    a.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    b.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
  }
  const std::vector<std::int32_t> four = {17, 5, 6, 7}, three = {17, 5, 6};
  ExpectSameRows(a.Target({{0, four}, {1, four}, {2, four}, {3, four}}, true),
                 b.Target({{0, four}, {1, four}, {2, four}, {3, four}}, true), "verify of 4");
  EXPECT_EQ(backend().captures, 6 + 1);
  EXPECT_EQ(backend().replays, 1);
  ExpectSameRows(a.Target({{0, three}, {1, three}}, true), b.Target({{0, three}, {1, three}}, true), "verify of 3");
  EXPECT_EQ(backend().captures, 6 + 1);
  EXPECT_EQ(backend().replays, 1);
}

TEST_F(SpeculativeGraphsTest, BatchesAGraphDoesNotTakeRunEagerly) {
  SpecDriver a(graphs(), 6, kPage, kPagesPerSequence), b(*eager_, 6, kPage, kPagesPerSequence);
  graphs().CaptureDecodeGraphs(2);
  const int captured = backend().captures;
  for (int s = 0; s < 6; ++s) {
    const std::vector<std::int32_t> prompt = Tokens(5 + s, 70 + s, eager_->vocab_size());
    ExpectSameRows(a.Target({{s, prompt}}, false), b.Target({{s, prompt}}, false), "prefill");
    std::vector<std::int32_t> known = prompt;
    known.push_back(11);  // every run's first token
    a.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    b.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
  }
  const std::vector<std::int32_t> run = {11, 12, 13};
  // A verify run beside a decode row, verify runs of different lengths, five runs (over the
  // largest size), a verify run beside a prefill chunk: all eager, all equal.
  const std::vector<std::vector<std::pair<int, std::vector<std::int32_t>>>> steps = {
      {{0, run}, {1, {4}}},
      {{0, run}, {1, {21, 22}}},
      {{0, run}, {5, {1, 2, 3, 4, 5, 6}}},
      {{0, run}, {1, run}, {2, run}, {3, run}, {4, run}},
  };
  for (std::size_t i = 0; i < steps.size(); ++i)
    ExpectSameRows(a.Target(steps[i], true), b.Target(steps[i], true), StrCat("step ", i));
  // After the last step (five runs, their first rows kept), the draft extend and a chained draft
  // step of five rows (over the largest size) run eagerly too.
  a.SetChunks({0, 1, 2, 3, 4});
  b.SetChunks({0, 1, 2, 3, 4});
  std::vector<std::int32_t> positions, tokens;
  for (int s = 0; s < 5; ++s) {
    a.Commit(s, 1, {9});
    b.Commit(s, 1, {9});
    positions.push_back(static_cast<std::int32_t>(b.tokens(s).size()) - 1);
    tokens.push_back(3 + s);
  }
  const std::vector<std::int32_t> rows = {1, 1, 1, 1, 1};
  ExpectSameRows(a.Extend(rows), b.Extend(rows), "extend");
  ExpectSameRows(a.Chain(positions, tokens), b.Chain(positions, tokens), "chain");
  EXPECT_EQ(backend().captures, captured);
  EXPECT_EQ(backend().replays, 0);
}

TEST_F(SpeculativeGraphsTest, AFailedCaptureFallsBackToEagerSteps) {
  backend().fail_captures = true;
  SpeculateBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}}, 2, 2);
  // At start-up each set tried its largest size, then its smallest; no size is tried again.
  EXPECT_EQ(backend().captures, 3 * 2);
  EXPECT_EQ(backend().replays, 0);
}

}  // namespace
}  // namespace fission::model
