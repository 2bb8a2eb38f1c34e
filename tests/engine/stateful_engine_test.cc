// The engine with a model that keeps per-request state and a paged class of one entry per 4
// tokens (tests/engine/stateful_model_testlib.h): admission reserves a state slot, preemption and
// abort free it, the number of slots bounds what runs, chunks cut entries anywhere, and every
// output equals the reference whatever the batch.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"
#include "engine/stateful_model_testlib.h"

namespace fission::engine {
namespace {

using testing::Collector;
using testing::FakeStatefulLM;
using testing::Greedy;
using testing::MakePrompt;

EngineConfig Config() {
  EngineConfig c;
  c.page_size = 8;
  c.max_total_tokens = 4096;
  c.chunked_prefill_size = 13;  // cuts the 4-token entries at every offset
  c.max_prefill_tokens = 13;
  c.max_running_requests = 5;
  return c;
}

std::vector<std::vector<std::int32_t>> Prompts(int count, std::int64_t vocab) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < count; ++i) prompts.push_back(MakePrompt(100 + i, 3 + (i * 29) % 61, vocab));
  return prompts;
}

// Steps until idle, checking the page and state-slot books after every step.
void RunChecked(Engine& engine) {
  while (engine.HasWork()) {
    engine.Step();
    ASSERT_EQ(engine.CheckPageAccounting(), "");
  }
}

TEST(StatefulEngine, AdmissionReservesAStateSlotAndOutputsMatchTheReference) {
  FakeStatefulLM model;
  Engine engine(&model, Config());
  EXPECT_EQ(engine.num_state_slots(), 5);  // one per running request
  EXPECT_EQ(model.memory_plan().num_state_slots, 5);
  const auto prompts = Prompts(12, model.vocab_size());
  Collector collector;
  std::vector<std::int64_t> ids;
  for (const auto& p : prompts) ids.push_back(collector.Submit(engine, p, Greedy(9)));
  RunChecked(engine);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(collector.results(ids[i])[0].tokens, model.ReferenceGreedy(prompts[i], 9)) << "request " << i;
  EXPECT_LE(model.max_sequences_in_step(), 5);
  EXPECT_EQ(model.slots_seen().size(), 5u);
  EXPECT_EQ(engine.stats().free_state_slots, 5);  // all back
}

TEST(StatefulEngine, TheSlotCountBoundsWhatRuns) {
  FakeStatefulLM model(/*state_entries=*/512);  // 4 KiB a slot
  EngineConfig c = Config();
  // Slots take at most half of a byte budget: this one has room for two.
  c.kv_cache_bytes = 4 * model.Memory().state_slot_bytes();
  c.max_running_requests = 40;
  Engine engine(&model, c);
  EXPECT_EQ(engine.num_state_slots(), 2);
  const auto prompts = Prompts(6, model.vocab_size());
  Collector collector;
  std::vector<std::int64_t> ids;
  for (const auto& p : prompts) ids.push_back(collector.Submit(engine, p, Greedy(5)));
  RunChecked(engine);
  EXPECT_EQ(model.max_sequences_in_step(), 2);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(collector.results(ids[i])[0].tokens, model.ReferenceGreedy(prompts[i], 5)) << "request " << i;
}

TEST(StatefulEngine, PreemptionFreesTheSlotAndRecomputesTheState) {
  FakeStatefulLM model;
  EngineConfig c = Config();
  c.max_total_tokens = 96;  // 12 pages; 5 short prompts all start, then grow to 6 pages each
  Engine engine(&model, c);
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(MakePrompt(300 + i, 3 + i, model.vocab_size()));
  Collector collector;
  std::vector<std::int64_t> ids;
  for (const auto& p : prompts) ids.push_back(collector.Submit(engine, p, Greedy(40)));
  RunChecked(engine);
  EXPECT_GT(engine.stats().preemptions, 0);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(collector.results(ids[i])[0].tokens, model.ReferenceGreedy(prompts[i], 40)) << "request " << i;
  EXPECT_EQ(engine.stats().free_state_slots, 5);
}

TEST(StatefulEngine, AbortFreesTheSlot) {
  FakeStatefulLM model;
  Engine engine(&model, Config());
  Collector collector;
  const auto prompts = Prompts(3, model.vocab_size());
  std::vector<std::int64_t> ids;
  for (const auto& p : prompts) ids.push_back(collector.Submit(engine, p, Greedy(50)));
  for (int i = 0; i < 6; ++i) engine.Step();
  EXPECT_EQ(engine.stats().free_state_slots, 2);
  engine.Abort(ids[1]);
  engine.Step();
  ASSERT_EQ(engine.CheckPageAccounting(), "");
  EXPECT_EQ(engine.stats().free_state_slots, 3);
  RunChecked(engine);
  EXPECT_EQ(collector.results(ids[1])[0].finish_reason, FinishReason::kAbort);
  EXPECT_EQ(collector.results(ids[2])[0].tokens, model.ReferenceGreedy(prompts[2], 50));
  EXPECT_EQ(engine.stats().free_state_slots, 5);
}

TEST(StatefulEngine, OutputsDoNotDependOnTheBatch) {
  FakeStatefulLM model;
  const auto prompts = Prompts(7, model.vocab_size());
  std::vector<std::vector<std::int32_t>> alone;
  for (const auto& p : prompts) {
    Engine engine(&model, Config());
    Collector collector;
    const auto id = collector.Submit(engine, p, Greedy(11));
    RunChecked(engine);
    alone.push_back(collector.results(id)[0].tokens);
  }
  Engine engine(&model, Config());
  Collector collector;
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back(collector.Submit(engine, prompts[i], Greedy(11)));
    engine.Step();  // arrivals while others prefill and decode
  }
  RunChecked(engine);
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collector.results(ids[i])[0].tokens, alone[i]) << i;
}

TEST(StatefulEngine, ThePrefixCacheIsOffForPerRequestState) {
  FakeStatefulLM model;
  EngineConfig c = Config();
  c.disable_radix_cache = false;
  Engine engine(&model, c);
  const auto prompt = MakePrompt(7, 40, model.vocab_size());
  Collector collector;
  const auto first = collector.Submit(engine, prompt, Greedy(4));
  RunChecked(engine);
  const auto second = collector.Submit(engine, prompt, Greedy(4));
  RunChecked(engine);
  EXPECT_EQ(collector.results(second)[0].cached_tokens, 0);
  EXPECT_EQ(engine.stats().cached_pages, 0);
  EXPECT_EQ(collector.results(first)[0].tokens, collector.results(second)[0].tokens);
}

}  // namespace
}  // namespace fission::engine
