// Speculative decoding's captured steps on the CPU (model/replaying_backend.h): verify runs (every
// sequence its last token and S drafts, all rows returning logits), the draft extends after them
// (each sequence's committed rows padded to S + 1 rows, model/draft_batch.h) and the draft layer's
// chained steps (one row per sequence) run as graph replays at the captured sizes and padded to
// them; a replay gives the eager step's bits, the hidden rows it keeps feed the next draft step
// exactly as an eager step's do, and batches a graph does not take run eagerly.
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
  // Batches of 4 and 2 (captured sizes), 3 and 1 (padded to 4 and 2); contexts cross pages; every
  // batch's sequences keep different counts of drafts (0 to 3: extends of 1 to 4 rows, padded).
  SpeculateBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}, {0, 2, 3}, {2}}, 4, 3);
  EXPECT_EQ(graphs().padded_extend_rows(), 4);
  // Decode, verify, extend and draft graphs of sizes 4 and 2, each captured once; then every
  // verify run, every draft extend and every chained draft step (two a round and batch) is a
  // replay. The extends over the prompts (prefill chunks) run eagerly.
  EXPECT_EQ(backend().captures, 8);
  EXPECT_EQ(backend().replays, 4 * 4 * (1 + 1 + 2));
}

TEST_F(SpeculativeGraphsTest, OneDraftHasNoChainedSteps) {
  // Extends of 1 or 2 rows, padded to 2; the 2-token prompt's sequence has just enough positions.
  SpeculateBoth({5, 2, 11}, {{0, 1, 2}, {2, 0}}, 3, 1);
  EXPECT_EQ(graphs().padded_extend_rows(), 2);
  // Decode, verify runs of 2 tokens and extends of 2 rows at sizes 4 and 2 at start-up, no draft
  // set; a verify run and an extend replay a round and batch.
  EXPECT_EQ(backend().captures, 6);
  EXPECT_EQ(backend().replays, 2 * 3 * 2);
}

TEST_F(SpeculativeGraphsTest, CaptureAtStartUpCoversEverySet) {
  graphs().AllocateMemory({4 * kPagesPerSequence, kPage, 0});
  graphs().CaptureDecodeGraphs(3);
  // Decode, verify (4 tokens a sequence), extend (4 rows a sequence) and draft graphs, sizes 4
  // and 2 each.
  EXPECT_EQ(backend().captures, 8);
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
  EXPECT_EQ(backend().captures, 8 + 1);
  EXPECT_EQ(backend().replays, 1);
  ExpectSameRows(a.Target({{0, three}, {1, three}}, true), b.Target({{0, three}, {1, three}}, true), "verify of 3");
  EXPECT_EQ(backend().captures, 8 + 1);
  EXPECT_EQ(backend().replays, 1);
  // The extend after those shorter runs (all three rows kept, and one) is still padded to 4 rows
  // a sequence: the new memory's extend graph of size 2 is captured and replays it.
  a.SetChunks({0, 1});
  b.SetChunks({0, 1});
  a.Commit(0, 3, {5, 6, 8});
  b.Commit(0, 3, {5, 6, 8});
  a.Commit(1, 1, {8});
  b.Commit(1, 1, {8});
  ExpectSameRows(a.Extend({3, 1}, 4), b.Extend({3, 1}, 4), "extend after verify of 3");
  EXPECT_EQ(backend().captures, 8 + 2);
  EXPECT_EQ(backend().replays, 2);
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
  ExpectSameRows(a.Extend(rows, 3), b.Extend(rows, 3), "extend");
  ExpectSameRows(a.Chain(positions, tokens), b.Chain(positions, tokens), "chain");
  EXPECT_EQ(backend().captures, captured);
  EXPECT_EQ(backend().replays, 0);
}

TEST_F(SpeculativeGraphsTest, ExtendsAGraphDoesNotTakeRunEagerly) {
  SpecDriver a(graphs(), 7, kPage, kPagesPerSequence), b(*eager_, 7, kPage, kPagesPerSequence);
  graphs().CaptureDecodeGraphs(3);
  const int captured = backend().captures;
  // Prompts of 1 and 2 tokens (sequences 0 and 1), then longer ones.
  const std::vector<int> lengths = {1, 2, 5, 6, 7, 8, 9};
  for (int s = 0; s < 7; ++s) {
    const std::vector<std::int32_t> prompt = Tokens(lengths[s], 60 + s, eager_->vocab_size());
    ExpectSameRows(a.Target({{s, prompt}}, false), b.Target({{s, prompt}}, false), "prefill");
    std::vector<std::int32_t> known = prompt;
    known.push_back(11);  // every run's first token
    a.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    b.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
  }
  const int replayed = backend().replays;  // the 1-token prompt's step is a decode replay
  const std::vector<std::int32_t> run = {11, 12, 13, 14};
  auto target = [&](const std::vector<std::pair<int, std::vector<std::int32_t>>>& chunks, const std::string& what) {
    ExpectSameRows(a.Target(chunks, true), b.Target(chunks, true), what);
    std::vector<int> seqs;
    for (const auto& c : chunks) seqs.push_back(c.first);
    a.SetChunks(seqs);
    b.SetChunks(seqs);
  };
  auto verify = [&](const std::vector<int>& seqs, const std::string& what) {
    std::vector<std::pair<int, std::vector<std::int32_t>>> chunks;
    for (int s : seqs) chunks.push_back({s, run});
    target(chunks, what);
  };
  // `rows` of the run kept: its drafts before the last, then the target's own token 9.
  auto commit = [&](int s, std::int32_t rows) {
    std::vector<std::int32_t> emitted(run.begin() + 1, run.begin() + rows);
    emitted.push_back(9);
    a.Commit(s, rows, emitted);
    b.Commit(s, rows, emitted);
  };
  auto extend = [&](const std::vector<std::int32_t>& rows, const std::string& what) {
    ExpectSameRows(a.Extend(rows, 4), b.Extend(rows, 4), what);
  };
  // The 1-token prompt's sequence has only two positions up to its last row: not padded, so its
  // extend (beside a padded one) runs as it is, eagerly. The verify runs replay.
  verify({0, 1}, "verify of a short sequence");
  commit(0, 1);
  commit(1, 2);
  extend({1, 2}, "extend of a sequence too short to pad");
  EXPECT_EQ(backend().replays, replayed + 1);
  // Both padded: the extend replays.
  verify({2, 3}, "verify");
  commit(2, 4);
  commit(3, 3);
  extend({4, 3}, "padded extend");
  EXPECT_EQ(backend().replays, replayed + 3);
  // A verify run beside a prefill chunk (6 rows, not padded): both steps eager.
  target({{4, run}, {5, {11, 2, 3, 4, 5, 6}}}, "verify beside a prefill chunk");
  commit(4, 2);
  a.Commit(5, 6, {2, 3, 4, 5, 6, 9});
  b.Commit(5, 6, {2, 3, 4, 5, 6, 9});
  extend({2, 6}, "extend beside a prefill chunk's");
  // Five padded extends: over the largest size.
  verify({1, 2, 3, 4, 6}, "verify of five");
  const std::vector<std::int32_t> five = {1, 2, 3, 4, 1};
  for (std::size_t k = 0; k < five.size(); ++k) commit(std::vector<int>{1, 2, 3, 4, 6}[k], five[k]);
  extend(five, "extend of five");
  EXPECT_EQ(backend().captures, captured);
  EXPECT_EQ(backend().replays, replayed + 3);
}

// The committed rows of a padded extend are those of the same extend unpadded (decode rows, each
// row's bits its own on the CPU), and its padding rows write nothing: the two models' memories
// stay equal byte for byte.
TEST(SpeculativePaddedExtend, IsItsCommittedRowsAndWritesNothing) {
  ShardOptions options;
  options.cuda_graphs.disabled = true;
  options.load_draft = true;
  auto padded = LoadReplayed(FixtureModelDir("tiny-deepseek-v3"), options);
  auto unpadded = LoadReplayed(FixtureModelDir("tiny-deepseek-v3"), options);
  // Decode rows that no sequence is long enough to pad.
  constexpr std::int32_t kNeverPadded = 1 << 20;
  SpecDriver a(*padded->model, 3), b(*unpadded->model, 3);
  const std::int64_t vocab = padded->model->vocab_size();
  for (int s = 0; s < 3; ++s) {
    const std::vector<std::int32_t> prompt = Tokens(3 + 3 * s, 20 + s, vocab);
    ExpectSameRows(a.Target({{s, prompt}}, false), b.Target({{s, prompt}}, false), "prefill");
    std::vector<std::int32_t> known = prompt;
    known.push_back(7);
    a.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    b.Commit(s, static_cast<std::int32_t>(prompt.size()), known);
    a.SetChunks({s});
    b.SetChunks({s});
    const std::vector<std::int32_t> all = {static_cast<std::int32_t>(prompt.size())};
    ExpectSameRows(a.Extend(all), b.Extend(all), "prefill extend");  // the draft cache the padding reads
  }
  const std::vector<std::int32_t> run = {7, 30, 31, 32};
  ExpectSameRows(a.Target({{0, run}, {1, run}, {2, run}}, true), b.Target({{0, run}, {1, run}, {2, run}}, true),
                 "verify");
  a.SetChunks({0, 1, 2});
  b.SetChunks({0, 1, 2});
  // 1, 2 and 4 rows kept: 3, 2 and 0 padding rows at positions the sequences had committed.
  const std::vector<std::vector<std::int32_t>> emitted = {{40}, {30, 41}, {30, 31, 32, 42}};
  for (int s = 0; s < 3; ++s) {
    a.Commit(s, static_cast<std::int32_t>(emitted[s].size()), emitted[s]);
    b.Commit(s, static_cast<std::int32_t>(emitted[s].size()), emitted[s]);
  }
  const std::vector<std::int32_t> rows = {1, 2, 4};
  ExpectSameRows(a.Extend(rows, 4), b.Extend(rows, kNeverPadded), "extend");
  // The next draft step reads the extend's last rows: the same either way.
  const std::vector<std::int32_t> positions = {static_cast<std::int32_t>(b.tokens(0).size()) - 1,
                                               static_cast<std::int32_t>(b.tokens(1).size()) - 1,
                                               static_cast<std::int32_t>(b.tokens(2).size()) - 1};
  ExpectSameRows(a.Chain(positions, {1, 2, 3}), b.Chain(positions, {1, 2, 3}), "chained draft step");
  const ModelMemory& ma = padded->model->memory();
  const ModelMemory& mb = unpadded->model->memory();
  for (std::size_t c = 0; c < ma.spec().classes.size(); ++c)
    for (int layer = 0; layer < ma.spec().classes[c].layers; ++layer) {
      const Tensor& x = ma.entries(static_cast<int>(c), layer);
      const Tensor& y = mb.entries(static_cast<int>(c), layer);
      ASSERT_EQ(x.bytes(), y.bytes());
      EXPECT_EQ(std::memcmp(x.data, y.data, x.bytes()), 0) << ma.spec().classes[c].name << ", layer " << layer;
    }
}

TEST_F(SpeculativeGraphsTest, AFailedCaptureFallsBackToEagerSteps) {
  backend().fail_captures = true;
  SpeculateBoth({3, 9, 14, 6}, {{0, 1, 2, 3}, {1, 3}}, 2, 2);
  // At start-up each set (decode, verify, extend, draft) tried its largest size, then its
  // smallest; no size is tried again.
  EXPECT_EQ(backend().captures, 4 * 2);
  EXPECT_EQ(backend().replays, 0);
}

}  // namespace
}  // namespace fission::model
