// Speculative decoding through captured steps, on the CPU: the tiny checkpoint's NextN layer on a
// backend whose graphs replay by running the step again (tests/model/replaying_backend.h). Verify
// runs and chained draft steps replay graphs wherever the batch allows; outputs and acceptance
// are those of eager speculative decoding (and greedy outputs those of plain decoding) whatever
// the batch composition, the padding, sequences finishing mid-draft or a mix that runs eagerly.
// Also the benchmark mode that accepts every draft.
#include <gtest/gtest.h>

#include <string>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"
#include "engine/speculative_testlib.h"
#include "engine/offline.h"
#include "model/replaying_backend.h"
#include "model/runtime/model_loader.h"

namespace fission::engine {
namespace {

using testing::Collected;
using testing::Collector;
using testing::Greedy;
using testing::MakePrompt;

std::string TinyDir() { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3"; }

std::unique_ptr<model::ReplayedModel> GraphModel() {
  model::ShardOptions options;
  options.cuda_graphs.batch_sizes = {1, 2, 4};
  options.load_draft = true;
  return model::LoadReplayed(TinyDir(), options);
}

std::unique_ptr<model::CausalLM> EagerModel(bool draft) {
  model::LoadOptions o;
  o.load_draft = draft;
  return model::LoadCausalLM(TinyDir(), o);
}

EngineConfig Config(int steps, bool accept_all = false) {
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 2048;
  c.chunked_prefill_size = 16;
  if (steps > 0) {
    c.speculative.algorithm = "NEXTN";
    c.speculative.num_steps = steps;
    c.speculative.accept_all_for_benchmark = accept_all;
  }
  return c;
}

using Job = testing::SpecJob;
using testing::ExpectSameTokens;
using testing::RunJobs;

// Prompts of 1 to 40 tokens and outputs of 1 to 21, so that batches shrink step by step (padded
// sizes) and sequences reach max_new_tokens in the middle of their drafts.
std::vector<Job> Jobs(int count) {
  std::vector<Job> jobs;
  const int lengths[] = {1, 5, 23, 40, 9, 14, 3};
  const int outputs[] = {12, 7, 21, 3, 1, 16, 9};
  for (int i = 0; i < count; ++i) jobs.push_back({MakePrompt(100 + i, lengths[i % 7], 512), Greedy(outputs[i % 7])});
  return jobs;
}



void ExpectSameSpeculation(const EngineStats& a, const EngineStats& b) {
  EXPECT_EQ(a.spec_verify_runs, b.spec_verify_runs);
  EXPECT_EQ(a.spec_draft_tokens, b.spec_draft_tokens);
  EXPECT_EQ(a.spec_accepted_tokens, b.spec_accepted_tokens);
  EXPECT_EQ(a.spec_draft_steps, b.spec_draft_steps);
}

TEST(SpeculativeGraphs, GreedyOutputsMatchPlainAndEagerSpeculation) {
  auto plain_model = EagerModel(false);
  auto eager = EagerModel(true);
  EngineStats plain_stats, eager_stats, graph_stats;
  const std::vector<Job> jobs = Jobs(5);  // five sequences: over the largest size at first
  const std::vector<Collected> plain = RunJobs(plain_model.get(), Config(0), jobs, &plain_stats);
  for (int steps : {1, 3}) {
    SCOPED_TRACE(steps);
    auto graphs = GraphModel();
    ExpectSameTokens(RunJobs(graphs->model.get(), Config(steps), jobs, &graph_stats), plain);
    RunJobs(eager.get(), Config(steps), jobs, &eager_stats);
    ExpectSameSpeculation(graph_stats, eager_stats);
    EXPECT_GT(graphs->backend.replays, 0);
  }
}

TEST(SpeculativeGraphs, AcceptingAllMatchesEagerAndKeepsEveryDraft) {
  auto eager = EagerModel(true);
  for (int steps : {1, 3}) {
    SCOPED_TRACE(steps);
    auto graphs = GraphModel();
    EngineStats graph_stats, eager_stats;
    const std::vector<Job> jobs = Jobs(7);
    const std::vector<Collected> got = RunJobs(graphs->model.get(), Config(steps, true), jobs, &graph_stats);
    ExpectSameTokens(got, RunJobs(eager.get(), Config(steps, true), jobs, &eager_stats));
    ExpectSameSpeculation(graph_stats, eager_stats);
    EXPECT_GT(graph_stats.spec_draft_tokens, 0);
    EXPECT_EQ(graph_stats.spec_accepted_tokens, graph_stats.spec_draft_tokens);
    for (std::size_t i = 0; i < jobs.size(); ++i)
      EXPECT_EQ(got[i].tokens.size(), static_cast<std::size_t>(jobs[i].params.max_new_tokens)) << "request " << i;
    EXPECT_GT(graphs->backend.replays, 0);
  }
}

TEST(SpeculativeGraphs, SequencesThatDecodePlainlyRunEagerlyBesideVerifyRuns) {
  // Penalties keep a sequence from drafting: its decode row beside others' verify runs makes a
  // step no graph takes.
  std::vector<Job> jobs = Jobs(4);
  jobs[1].params.repetition_penalty = 1.3;
  jobs[2].params.presence_penalty = 0.5;
  auto plain_model = EagerModel(false);
  auto graphs = GraphModel();
  auto eager = EagerModel(true);
  EngineStats plain_stats, graph_stats, eager_stats;
  const std::vector<Collected> plain = RunJobs(plain_model.get(), Config(0), jobs, &plain_stats);
  ExpectSameTokens(RunJobs(graphs->model.get(), Config(2), jobs, &graph_stats), plain);
  RunJobs(eager.get(), Config(2), jobs, &eager_stats);
  ExpectSameSpeculation(graph_stats, eager_stats);
}

TEST(SpeculativeGraphs, TheBenchmarkModeIsAFlagOfItsOwn) {
  EngineConfig c;
  EXPECT_FALSE(c.speculative.accept_all_for_benchmark);  // never on by default
  const std::vector<std::string> args = {"--speculative-accept-all-for-benchmark"};
  std::size_t i = 0;
  ASSERT_TRUE(ParseEngineFlag(args, &i, &c));
  EXPECT_EQ(i, 1u);
  EXPECT_TRUE(c.speculative.accept_all_for_benchmark);
  EXPECT_THROW(c.Validate(), Error);  // without --speculative-algorithm
  c.speculative.algorithm = "NEXTN";
  EXPECT_NO_THROW(c.Validate());
  // fission generate's summary reports the acceptance (tools/gpu/spec_bench.sh reads it).
  OfflineReport report;
  report.stats.spec_verify_runs = 4;
  report.stats.spec_draft_tokens = 12;
  report.stats.spec_accepted_tokens = 12;
  EXPECT_NE(ThroughputSummary(report).find("12 of 12 drafts accepted, accept length 4.000"), std::string::npos)
      << ThroughputSummary(report);
}

}  // namespace
}  // namespace fission::engine
