// Tensor and context parallelism on the CPU (ranks as threads): every layout equals one rank.
#include <gtest/gtest.h>

#include <random>

#include "model/runtime/parallel_model.h"
#include "model/step_inputs.h"
#include "model/token_layout.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

ForwardBatch KnownBatch() {
  // Sequence 0: 5 new tokens after 2 cached; sequence 1: 4 new tokens, nothing cached.
  ForwardBatch b;
  b.token_ids = {10, 11, 12, 13, 14, 20, 21, 22, 23};
  b.positions = {2, 3, 4, 5, 6, 0, 1, 2, 3};
  b.kv_slots = {2, 3, 4, 5, 6, 8, 9, 10, 11};
  b.sequences = {{0, 5, 2, {0, 1}}, {5, 4, 0, {2}}};
  b.logits_indices = {4, 8};
  return b;
}

std::vector<std::int32_t> Values(std::span<const std::int32_t> s) { return {s.begin(), s.end()}; }

MemorySpec OneLatentClass() {
  CacheClass latent;
  latent.name = "latent";
  latent.fields = {{"row", DType::kF32, 4}};
  return {{latent}};
}

TEST(PcpPlan, SplitsTokensRoundRobin) {
  const ForwardBatch batch = KnownBatch();
  const PcpPlan r0 = PlanContextParallelStep(batch, 2, 0, 1);
  const PcpPlan r1 = PlanContextParallelStep(batch, 2, 1, 1);
  EXPECT_EQ(r0.rows, 5);  // 9 tokens over 2 ranks: padded to 10
  EXPECT_EQ(r0.owned, (std::vector<std::int32_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(r1.owned, (std::vector<std::int32_t>{1, 3, 5, 7}));
  EXPECT_EQ(r1.token_ids, (std::vector<std::int32_t>{11, 13, 20, 22, 0}));  // tail padding
  ASSERT_EQ(r0.queries.size(), 2u);
  EXPECT_EQ(r0.queries[0].len, 3);
  EXPECT_EQ(r0.queries[1].first_row, 3);
  // After an all-gather token i sits at (i % 2) * 5 + i / 2.
  EXPECT_EQ(r0.gathered_row, (std::vector<std::int32_t>{0, 5, 1, 6, 2, 7, 3, 8, 4}));

  // What attention sees, from the step-input block.
  auto cpu = kernels::MakeCpuBackend();
  StepInputs inputs(*cpu, OneLatentClass(), 1);
  const StepView& v0 = inputs.Write(batch, r0, 4);
  // Rank 0: sequence 0 queries at positions 2, 4, 6; sequence 1 at 1, 3.
  ASSERT_EQ(v0.seqs.size(), 2u);
  EXPECT_EQ(v0.seqs[0].query_len, 3);
  EXPECT_EQ(Values(v0.seqs[0].query_positions), (std::vector<std::int32_t>{2, 4, 6}));
  EXPECT_EQ(v0.seqs[1].query_start, 3);
  EXPECT_EQ(Values(v0.seqs[1].query_positions), (std::vector<std::int32_t>{1, 3}));
  EXPECT_EQ(v0.seqs[0].kv_len, 7);
  EXPECT_EQ(Values(v0.seqs[0].block_table).front(), 0);
  EXPECT_EQ(Values(v0.seqs[1].block_table).front(), 2);
  EXPECT_FALSE(v0.seqs[0].decode);
  EXPECT_EQ(Values(v0.own_rows), (std::vector<std::int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(Values(v0.logit_rows), (std::vector<std::int32_t>{2, 4}));  // tokens 4 and 8, gathered
  // Rank 1: sequence 0 at 3, 5; sequence 1 at 0, 2.
  const StepView& v1 = inputs.Write(batch, r1, 4);
  EXPECT_EQ(v1.seqs[0].query_len, 2);
  EXPECT_EQ(v1.seqs[1].query_start, 2);
  EXPECT_EQ(Values(v1.seqs[1].query_positions), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(Values(v1.own_rows), (std::vector<std::int32_t>{5, 6, 7, 8, 9}));
}

// The indexer's query split: attention-TP rank 1 of 2 scores local rows 1, 3, 5, 7 (compact rows
// 0..3), sequence by sequence, and the gathered selections return to row order.
TEST(PcpPlan, IndexerQuerySplitTakesEveryOtherRow) {
  const ForwardBatch batch = KnownBatch();
  auto cpu = kernels::MakeCpuBackend();
  StepInputs inputs(*cpu, OneLatentClass(), 2);
  inputs.SplitIndexerQueries(2, 1);
  const StepView& v = inputs.Write(batch, PlanContextParallelStep(batch, 1, 0, 1), 4);
  ASSERT_TRUE(v.splits_indexer());
  EXPECT_EQ(Values(v.indexer_rows), (std::vector<std::int32_t>{1, 3, 5, 7, 0}));  // padded to ceil(9 / 2)
  EXPECT_EQ(Values(v.indexer_positions), (std::vector<std::int32_t>{3, 5, 0, 2, 0}));
  ASSERT_EQ(v.indexer_seqs.size(), 2u);
  EXPECT_EQ(v.indexer_seqs[0].query_start, 0);  // rows 1, 3 of sequence 0 (rows 0-4)
  EXPECT_EQ(v.indexer_seqs[0].query_len, 2);
  EXPECT_EQ(Values(v.indexer_seqs[0].query_positions), (std::vector<std::int32_t>{3, 5}));
  EXPECT_EQ(v.indexer_seqs[1].query_start, 2);  // rows 5, 7 of sequence 1 (rows 5-8)
  EXPECT_EQ(Values(v.indexer_seqs[1].query_positions), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(v.indexer_seqs[1].kv_len, 4);
  // Row i of the step comes from rank i % 2's compact row i / 2 of 5.
  EXPECT_EQ(Values(v.indexer_order), (std::vector<std::int32_t>{0, 5, 1, 6, 2, 7, 3, 8, 4}));
  // Decode-only steps (what graphs capture) are not split.
  ForwardBatch decode;
  decode.token_ids = {1, 2};
  decode.positions = {5, 9};
  decode.kv_slots = {5, 9};
  decode.sequences = {{0, 1, 5, {0, 1}}, {1, 1, 9, {2, 3}}};
  EXPECT_FALSE(inputs.Write(decode, PlanContextParallelStep(decode, 1, 0, 1), 4).splits_indexer());
}

TEST(PcpPlan, ShortAndDecodeOnlyStepsRunUnsplit) {
  const ForwardBatch batch = KnownBatch();
  EXPECT_FALSE(PlanContextParallelStep(batch, 2, 1, 10).split());  // under the threshold
  ForwardBatch decode;
  decode.token_ids = {1, 2};
  decode.positions = {5, 9};
  decode.kv_slots = {5, 9};
  decode.sequences = {{0, 1, 5, {0, 1}}, {1, 1, 9, {2, 3}}};
  const PcpPlan p = PlanContextParallelStep(decode, 2, 1, 1);
  EXPECT_FALSE(p.split());
  EXPECT_EQ(p.owned.size(), 2u);
  auto cpu = kernels::MakeCpuBackend();
  StepInputs inputs(*cpu, OneLatentClass(), 2);
  const StepView& v = inputs.Write(decode, p, 4);
  ASSERT_EQ(v.decode_seqs.size(), 2u);  // unsplit single-token steps decode
  EXPECT_TRUE(v.prefill_seqs.empty());
  EXPECT_EQ(Values(v.logit_rows), std::vector<std::int32_t>{});
  EXPECT_EQ(v.table_width, 2);
}

struct Layout {
  const char* fixture;
  int tp, cp;
  bool indexer_split = false;  // --dsa-indexer-query-split
};

class ParallelLayouts : public ::testing::TestWithParam<Layout> {};

// Chunked prefill, mixed prefill/decode steps, a prefix hit and 32 decode steps (RunMixedScenario)
// under the layout equal one rank. The DSA fixtures' 300-token sequence is far longer than their
// index_topk (32), so the indexer's keys are gathered and its selection made per rank.
TEST_P(ParallelLayouts, EqualSingleRank) {
  const Layout layout = GetParam();
  const std::string dir = FixtureModelDir(layout.fixture);
  auto single = LoadCausalLM(dir);
  LoadOptions options;
  options.tp_size = layout.tp;
  options.attn_cp_size = layout.cp;
  options.pcp_min_tokens = 2;  // split every prefill step, however short
  options.indexer_query_split = layout.indexer_split;
  auto parallel = LoadCausalLM(dir, options);
  std::vector<std::int32_t> want_tokens, got_tokens;
  const auto want = RunMixedScenario(*single, &want_tokens);
  const auto got = RunMixedScenario(*parallel, &got_tokens);
  const double worst = WorstRowError(got, want, single->vocab_size(), 1e-5);
  EXPECT_EQ(got_tokens, want_tokens);
  std::printf("%s tp %d cp %d%s: worst relative L2 %.3g\n", layout.fixture, layout.tp, layout.cp,
              layout.indexer_split ? " indexer split" : "", worst);
}

std::vector<Layout> AllLayouts() {
  std::vector<Layout> layouts;
  for (const char* fixture : {"tiny-deepseek-v3", "tiny-deepseek-v32", "tiny-glm-dsa"})
    for (auto [tp, cp] : {std::pair{1, 1}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}})
      if (std::string(fixture) == "tiny-deepseek-v3" || cp <= 2) layouts.push_back({fixture, tp, cp});
  for (const char* fixture : {"tiny-deepseek-v32", "tiny-glm-dsa"})
    for (auto [tp, cp] : {std::pair{2, 1}, {4, 1}, {4, 2}}) layouts.push_back({fixture, tp, cp, true});
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(CpuLocal, ParallelLayouts, ::testing::ValuesIn(AllLayouts()), [](const auto& info) {
  std::string name = StrCat(info.param.fixture, "_tp", info.param.tp, "_cp", info.param.cp,
                            info.param.indexer_split ? "_indexer_split" : "");
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
});

// After a split prefill every rank holds the full KV of every token: bit-identical across ranks,
// and equal to the single-rank cache within rounding.
TEST(ContextParallel, EveryRankHoldsTheFullKvCache) {
  const std::string dir = FixtureModelDir("tiny-deepseek-v3");
  LoadOptions options;
  options.tp_size = 4;
  options.attn_cp_size = 2;
  options.pcp_min_tokens = 2;
  auto single = LoadCausalLM(dir);
  auto model = LoadCausalLM(dir, options);
  auto* parallel = dynamic_cast<ParallelCausalLM*>(model.get());
  ASSERT_NE(parallel, nullptr);
  const auto prompt = Tokens(45, 8, single->vocab_size());
  StepRunner one(*single, 4, 32, 3), many(*parallel, 4, 32, 3);
  one.Prefill(one.AddSequence(), prompt, false);
  many.Prefill(many.AddSequence(), prompt, false);
  const int layers = MemoryOf(*single).spec().classes[0].layers;
  for (int layer = 0; layer < layers; ++layer) {
    for (std::int32_t pos = 0; pos < 45; ++pos) {
      const std::vector<float> want = one.KvRow(0, layer, pos);
      const std::vector<float> rank0 = many.KvRow(0, layer, pos);
      ASSERT_LE(RelativeL2(rank0, want.data(), static_cast<std::int64_t>(want.size())), 1e-5)
          << "layer " << layer << " position " << pos;
      for (int r = 1; r < parallel->world_size(); ++r)
        ASSERT_EQ(many.KvRow(0, layer, pos, r), rank0)
            << "rank " << r << " layer " << layer << " position " << pos;
    }
  }
}

TEST(ContextParallel, LayoutErrorsAreClear) {
  LoadOptions options;
  options.tp_size = 4;
  options.attn_cp_size = 3;
  try {
    LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attn-cp-size (3) must divide --tp-size (4)"), std::string::npos);
  }
  options.tp_size = 3;
  options.attn_cp_size = 1;
  try {
    LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not divisible by the 3 ranks"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fission::model
