// Engine behaviour with the fake paged model: batching invariance, chunked prefill, prefix cache,
// preemption, abort, failure handling, FCFS order.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::Collector;
using testing::FakeCausalLM;
using testing::Greedy;
using testing::MakePrompt;

EngineConfig SmallConfig() {
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 4096;
  return c;
}

// Runs every prompt alone, each in a fresh engine without a prefix cache.
std::vector<std::vector<std::int32_t>> RunAlone(FakeCausalLM& model, const std::vector<std::vector<std::int32_t>>& prompts,
                                                int max_new_tokens) {
  std::vector<std::vector<std::int32_t>> out;
  for (const auto& prompt : prompts) {
    EngineConfig c = SmallConfig();
    c.disable_radix_cache = true;
    c.chunked_prefill_size = -1;
    Engine engine(&model, c);
    Collector collector;
    const auto id = collector.Submit(engine, prompt, Greedy(max_new_tokens));
    engine.RunUntilIdle();
    out.push_back(collector.results(id)[0].tokens);
  }
  return out;
}

std::vector<std::vector<std::int32_t>> Prompts(int count, std::int64_t vocab, int min_len = 1, int max_len = 90) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < count; ++i) prompts.push_back(MakePrompt(i + 1, min_len + (i * 37) % (max_len - min_len + 1), vocab));
  return prompts;
}

TEST(EngineTest, GreedyMatchesTheReferenceModel) {
  FakeCausalLM model;
  const auto prompts = Prompts(3, model.vocab_size());
  const auto alone = RunAlone(model, prompts, 12);
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(alone[i], model.ReferenceGreedy(prompts[i], 12)) << i;
}

TEST(EngineTest, ConcurrentGreedyEqualsEachAlone) {
  FakeCausalLM model;
  const auto prompts = Prompts(16, model.vocab_size());
  const auto alone = RunAlone(model, prompts, 20);
  Engine engine(&model, SmallConfig());
  Collector collector;
  std::vector<std::int64_t> ids;
  // Half arrive at once, the rest while the first ones decode.
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(collector.Submit(engine, prompts[i], Greedy(20)));
    if (i >= prompts.size() / 2) engine.Step();
  }
  engine.RunUntilIdle();
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto& c = collector.results(ids[i])[0];
    EXPECT_EQ(c.tokens, alone[i]) << "request " << i;
    EXPECT_EQ(c.finish_reason, FinishReason::kLength);
    EXPECT_EQ(c.finished_reports, 1);
  }
  EXPECT_GT(model.mixed_steps(), 0) << "prefill and decode never shared a step";
  EXPECT_EQ(engine.CheckPageAccounting(), "");
}

}  // namespace
}  // namespace fission::engine
