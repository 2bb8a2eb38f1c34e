// The engine with data-parallel attention and expert parallelism on the tiny DeepSeek-V3
// checkpoint (ranks as threads): every layout's greedy tokens and logprobs equal one rank's,
// through uneven and empty DP groups, chunked prefill mixed with decode, preemption and aborts;
// each group keeps its own pages and prefix cache, and the expert load adds up.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"
#include "io/model_config.h"
#include "model/runtime/model_loader.h"

namespace fission::engine {
namespace {

using testing::Collected;
using testing::Collector;
using testing::Greedy;
using testing::MakePrompt;

std::string TinyDir() { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3"; }

struct Layout {
  int tp, dp, ep, cp;
};

struct ScenarioRun {
  std::vector<Collected> outputs;  // one per request, in submission order
  EngineStats stats;
  std::int64_t model_tokens = 0;  // tokens the model ran (every group's)
  int steps_with_an_empty_group = 0;
};

constexpr int kRequests = 13;
constexpr int kAborted = 4;  // aborted after a few steps

SamplingParams GreedyWithLogprobs(int n) {
  SamplingParams p = Greedy(n);
  p.logprobs = true;
  p.top_logprobs = 2;
  return p;
}

// Three requests at once, ten more two steps later, request kAborted aborted at step 4; a small
// pool per group forces preemption.
ScenarioRun RunScenario(model::CausalLM& model, std::int64_t max_total_tokens, const std::string& balance = "round_robin") {
  EngineConfig config;
  config.page_size = 4;
  config.max_total_tokens = max_total_tokens;
  config.chunked_prefill_size = 16;
  config.load_balance_method = balance;
  Engine engine(&model, config);
  Collector collector;
  std::vector<std::int64_t> ids;
  auto submit = [&](int k) {
    ids.push_back(collector.Submit(engine, MakePrompt(100 + k, 5 + 7 * k % 23, model.vocab_size()),
                                   GreedyWithLogprobs(6 + k % 5)));
  };
  ScenarioRun run;
  for (int k = 0; k < 3; ++k) submit(k);
  for (int step = 0; engine.HasWork(); ++step) {
    if (step == 2)
      for (int k = 3; k < kRequests; ++k) submit(k);
    if (step == 4) engine.Abort(ids[kAborted]);
    const std::int64_t before = engine.stats().steps;
    engine.Step();
    EXPECT_EQ(engine.CheckPageAccounting(), "") << "step " << step;
    if (engine.stats().steps == before) continue;
    for (int g = 0; g < engine.dp_size(); ++g) {
      run.model_tokens += engine.last_batch(g).num_tokens();
      run.steps_with_an_empty_group += engine.last_batch(g).token_ids.empty();
    }
    EXPECT_LT(step, 500);
  }
  for (std::int64_t id : ids) run.outputs.push_back(collector.results(id)[0]);
  run.stats = engine.stats();
  return run;
}

class DataParallelEngine : public ::testing::TestWithParam<Layout> {};

TEST_P(DataParallelEngine, EqualsOneRank) {
  const Layout l = GetParam();
  auto single = model::LoadCausalLM(TinyDir());
  model::LoadOptions options;
  options.tp_size = l.tp;
  options.dp_size = l.dp;
  options.enable_dp_attention = l.dp > 1;
  options.ep_size = l.ep;
  options.attn_cp_size = l.cp;
  options.pcp_min_tokens = 4;
  auto parallel = model::LoadCausalLM(TinyDir(), options);
  const ScenarioRun want = RunScenario(*single, 4096);
  // 48 tokens per group: the longest request fits alone, several at once do not.
  const ScenarioRun got = RunScenario(*parallel, 48);
  EXPECT_GT(got.stats.preemptions, 0);
  if (l.dp > 1) {
    EXPECT_GT(got.steps_with_an_empty_group, 0);
  }
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (int k = 0; k < kRequests; ++k) {
    const Collected& a = got.outputs[k];
    const Collected& b = want.outputs[k];
    if (k == kAborted) {
      EXPECT_EQ(a.finish_reason, FinishReason::kAbort);
      continue;
    }
    ASSERT_EQ(a.tokens, b.tokens) << "request " << k;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (std::size_t i = 0; i < a.logprobs.size(); ++i)
      EXPECT_NEAR(a.logprobs[i].logprob, b.logprobs[i].logprob, 1e-5 * std::max(1.0f, std::fabs(b.logprobs[i].logprob)))
          << "request " << k << " token " << i;
  }
  // Every token the model ran, once per MoE layer and routed expert, over the EP ranks.
  const io::ModelConfig c = io::LoadModelConfig(TinyDir());
  std::int64_t moe_layers = 0;
  for (std::int64_t layer = 0; layer < c.num_hidden_layers; ++layer) moe_layers += c.IsMoeLayer(layer);
  ASSERT_EQ(got.stats.expert_load.size(), static_cast<std::size_t>(l.ep));
  EXPECT_EQ(std::accumulate(got.stats.expert_load.begin(), got.stats.expert_load.end(), std::int64_t{0}),
            got.model_tokens * c.num_experts_per_tok * moe_layers);
  ASSERT_EQ(got.stats.dp_running.size(), static_cast<std::size_t>(l.dp));
}

std::vector<Layout> EngineLayouts() {
  std::vector<Layout> layouts;
  for (int tp : {2, 4})
    for (int dp : {1, 2, 4})
      for (int ep : {1, 2, 4})
        for (int cp : {1, 2})
          if (tp % (dp * cp) == 0 && tp % ep == 0 && !(dp == 1 && ep == 1)) layouts.push_back({tp, dp, ep, cp});
  return layouts;
}

INSTANTIATE_TEST_SUITE_P(CpuLocal, DataParallelEngine, ::testing::ValuesIn(EngineLayouts()), [](const auto& info) {
  return StrCat("tp", info.param.tp, "_dp", info.param.dp, "_ep", info.param.ep, "_cp", info.param.cp);
});

// Each group has its own pool and prefix cache: a repeated prompt hits only in the group that
// computed it, and round-robin places the repeat in the next group, shortest_queue in an idle one.
TEST(DataParallelEngineGroups, EachGroupHasItsOwnPrefixCacheAndQueue) {
  model::LoadOptions options;
  options.tp_size = 2;
  options.dp_size = 2;
  options.enable_dp_attention = true;
  auto model = model::LoadCausalLM(TinyDir(), options);
  EngineConfig config;
  config.page_size = 4;
  config.max_total_tokens = 256;
  Engine engine(model.get(), config);
  ASSERT_EQ(engine.dp_size(), 2);
  Collector collector;
  const std::vector<std::int32_t> prompt = MakePrompt(7, 21, model->vocab_size());
  const std::int64_t first = collector.Submit(engine, prompt, Greedy(3));
  engine.RunUntilIdle();
  // Round-robin: the repeat goes to group 1, whose cache is empty.
  const std::int64_t second = collector.Submit(engine, prompt, Greedy(3));
  engine.RunUntilIdle();
  // The third lands in group 0 again and hits the pages the first left there.
  const std::int64_t third = collector.Submit(engine, prompt, Greedy(3));
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(first)[0].cached_tokens, 0);
  EXPECT_EQ(collector.results(second)[0].cached_tokens, 0);
  EXPECT_EQ(collector.results(third)[0].cached_tokens, 20);
  EXPECT_EQ(collector.results(third)[0].tokens, collector.results(first)[0].tokens);
  EXPECT_EQ(collector.results(second)[0].tokens, collector.results(first)[0].tokens);
  EXPECT_EQ(engine.CheckPageAccounting(), "");
}

TEST(DataParallelEngineGroups, ShortestQueuePicksTheLeastBusyGroup) {
  model::LoadOptions options;
  options.tp_size = 4;
  options.dp_size = 4;
  options.enable_dp_attention = true;
  auto model = model::LoadCausalLM(TinyDir(), options);
  EngineConfig config;
  config.page_size = 4;
  config.max_total_tokens = 256;
  config.load_balance_method = "shortest_queue";
  Engine engine(model.get(), config);
  Collector collector;
  // A long request, then two short ones: each goes to an idle group, never behind the long one.
  collector.Submit(engine, MakePrompt(1, 9, model->vocab_size()), Greedy(20));
  engine.Step();
  collector.Submit(engine, MakePrompt(2, 9, model->vocab_size()), Greedy(2));
  collector.Submit(engine, MakePrompt(3, 9, model->vocab_size()), Greedy(2));
  engine.Step();
  EXPECT_EQ(engine.stats().dp_running, (std::vector<std::int32_t>{1, 1, 1, 0}));
  engine.RunUntilIdle();
  EXPECT_EQ(engine.CheckPageAccounting(), "");
  EngineConfig bad = config;
  bad.load_balance_method = "minimum_tokens";
  EXPECT_THROW(Engine(model.get(), bad), Error);
}

// Every 40 model steps with DP attention or EP the log shows each group's queue and the expert
// load per EP rank since the previous line.
TEST(DataParallelEngineGroups, TheStepLogShowsQueuesAndExpertLoad) {
  model::LoadOptions options;
  options.tp_size = 2;
  options.dp_size = 2;
  options.enable_dp_attention = true;
  options.ep_size = 2;
  auto model = model::LoadCausalLM(TinyDir(), options);
  EngineConfig config;
  config.page_size = 4;
  config.max_total_tokens = 256;
  Engine engine(model.get(), config);
  Collector collector;
  collector.Submit(engine, MakePrompt(5, 6, model->vocab_size()), Greedy(44));
  ::testing::internal::CaptureStderr();
  engine.RunUntilIdle();
  const std::string log = ::testing::internal::GetCapturedStderr();
  const std::size_t at = log.find("Parallel step 40: #running/#queue per DP group [1/0 0/0], expert load per EP rank");
  ASSERT_NE(at, std::string::npos) << log;
  // 40 steps: the 6-token prompt, then 39 decode tokens of group 0, times top-k 4 and 2 MoE layers.
  EXPECT_NE(log.find("token-expert pairs", at), std::string::npos) << log;
  EXPECT_NE(log.find(StrCat("(", (6 + 39) * 4 * 2, " token-expert pairs)"), at), std::string::npos) << log;
}

}  // namespace
}  // namespace fission::engine
