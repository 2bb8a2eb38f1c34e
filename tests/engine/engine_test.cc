// Engine behaviour with the fake paged model: batching invariance, chunked prefill, prefix cache,
// preemption, abort, failure handling, FCFS order.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
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


TEST(EngineTest, ChunkedPrefillMatchesUnchunked) {
  FakeCausalLM model;
  const auto prompts = Prompts(6, model.vocab_size(), 40, 150);
  const auto alone = RunAlone(model, prompts, 10);
  for (int chunk : {1, 7, 64}) {
    EngineConfig c = SmallConfig();
    c.chunked_prefill_size = chunk;
    Engine engine(&model, c);
    Collector collector;
    std::vector<std::int64_t> ids;
    for (const auto& prompt : prompts) ids.push_back(collector.Submit(engine, prompt, Greedy(10)));
    FakeCausalLM* m = &model;
    const std::int64_t before = m->forward_calls();
    engine.RunUntilIdle();
    for (std::size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(collector.results(ids[i])[0].tokens, alone[i]) << "chunk " << chunk << " request " << i;
    // Every prompt token ran once (no prefix overlap between these prompts).
    std::int64_t prompt_tokens = 0;
    for (const auto& prompt : prompts) prompt_tokens += static_cast<std::int64_t>(prompt.size());
    const EngineStats stats = engine.stats();
    EXPECT_EQ(stats.computed_prompt_tokens + stats.prefix_hit_tokens, prompt_tokens);
    // Chunking spreads the longest prompt over at least ceil(len / chunk) steps.
    EXPECT_GE(m->forward_calls() - before, (150 + chunk - 1) / chunk);
  }
}

TEST(EngineTest, ChunkBudgetBoundsPrefillTokensPerStep) {
  FakeCausalLM model;
  EngineConfig c = SmallConfig();
  c.chunked_prefill_size = 7;
  c.max_running_requests = 1;  // no decode tokens: every step is prefill only
  Engine engine(&model, c);
  Collector collector;
  collector.Submit(engine, MakePrompt(9, 100, model.vocab_size()), Greedy(1));
  engine.RunUntilIdle();
  EXPECT_EQ(model.max_tokens_in_step(), 7);
  EXPECT_EQ(model.forward_calls(), (100 + 6) / 7);
}

TEST(EngineTest, MaxPrefillTokensBoundsAStepWithoutChunking) {
  FakeCausalLM model;
  EngineConfig c = SmallConfig();
  c.chunked_prefill_size = -1;
  c.max_prefill_tokens = 50;
  Engine engine(&model, c);
  Collector collector;
  // Three 30-token prompts: only one fits the 50-token budget per step; an 80-token prompt runs alone.
  for (int i = 0; i < 3; ++i) collector.Submit(engine, MakePrompt(20 + i, 30, model.vocab_size()), Greedy(1));
  collector.Submit(engine, MakePrompt(30, 80, model.vocab_size()), Greedy(1));
  engine.RunUntilIdle();
  EXPECT_EQ(model.max_tokens_in_step(), 80);
  EXPECT_GE(model.forward_calls(), 4);
}

TEST(EngineTest, PrefixCacheHitsGiveIdenticalOutputsWithFewerComputedTokens) {
  FakeCausalLM model;
  const auto system = MakePrompt(77, 64, model.vocab_size());
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 5; ++i) {
    auto p = system;
    const auto tail = MakePrompt(100 + i, 10 + i, model.vocab_size());
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  const auto alone = RunAlone(model, prompts, 8);

  auto run = [&](bool disable_cache) {
    EngineConfig c = SmallConfig();
    c.disable_radix_cache = disable_cache;
    Engine engine(&model, c);
    Collector collector;
    std::vector<std::int64_t> ids;
    // The first request runs alone, then the others share its prefix.
    ids.push_back(collector.Submit(engine, prompts[0], Greedy(8)));
    engine.RunUntilIdle();
    for (std::size_t i = 1; i < prompts.size(); ++i) ids.push_back(collector.Submit(engine, prompts[i], Greedy(8)));
    engine.RunUntilIdle();
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(collector.results(ids[i])[0].tokens, alone[i]) << "cache " << !disable_cache << " request " << i;
      if (i > 0 && !disable_cache) {
        EXPECT_EQ(collector.results(ids[i])[0].cached_tokens, 64);
      }
    }
    EXPECT_EQ(engine.CheckPageAccounting(), "");
    return engine.stats();
  };
  const EngineStats with = run(false);
  const EngineStats without = run(true);
  std::int64_t total = 0;
  for (const auto& p : prompts) total += static_cast<std::int64_t>(p.size());
  EXPECT_EQ(without.computed_prompt_tokens, total);
  EXPECT_EQ(without.prefix_hit_tokens, 0);
  // The 64-token system prompt (16 pages of 4) is computed once, then hit by the 4 later requests.
  EXPECT_EQ(with.prefix_hit_tokens, 4 * 64);
  EXPECT_EQ(with.computed_prompt_tokens, total - 4 * 64);
}

TEST(EngineTest, PrefixCacheServesConcurrentRequestsAndGeneratedTokens) {
  FakeCausalLM model;
  const auto prompt = MakePrompt(5, 21, model.vocab_size());
  const auto expected = model.ReferenceGreedy(prompt, 30);
  Engine engine(&model, SmallConfig());
  Collector collector;
  const auto first = collector.Submit(engine, prompt, Greedy(30));
  // While the first decodes, a second request repeats its prompt and a part of its output: the
  // pages completed during decode are already cached.
  for (int i = 0; i < 15; ++i) engine.Step();
  auto longer = prompt;
  longer.insert(longer.end(), expected.begin(), expected.begin() + 12);
  const auto second = collector.Submit(engine, longer, Greedy(5));
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(first)[0].tokens, expected);
  EXPECT_EQ(collector.results(second)[0].tokens, model.ReferenceGreedy(longer, 5));
  EXPECT_EQ(collector.results(second)[0].cached_tokens, 32);  // 8 full pages of the 33 tokens
}

TEST(EngineTest, TinyKvBudgetCompletesEveryRequestByPreemption) {
  FakeCausalLM model;
  const auto prompts = Prompts(10, model.vocab_size(), 10, 40);
  const auto alone = RunAlone(model, prompts, 24);
  for (bool disable_cache : {true, false}) {
    for (int chunk : {-1, 8}) {
      EngineConfig c = SmallConfig();
      c.max_total_tokens = 64;  // 16 pages of 4: one request (<= 64 tokens) fits alone
      c.disable_radix_cache = disable_cache;
      c.chunked_prefill_size = chunk;
      Engine engine(&model, c);
      Collector collector;
      std::vector<std::int64_t> ids;
      for (const auto& prompt : prompts) ids.push_back(collector.Submit(engine, prompt, Greedy(24)));
      while (engine.HasWork()) {
        engine.Step();
        ASSERT_EQ(engine.CheckPageAccounting(), "");
      }
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        const auto& r = collector.results(ids[i])[0];
        EXPECT_EQ(r.tokens, alone[i]) << "request " << i << " cache " << !disable_cache << " chunk " << chunk;
        EXPECT_EQ(r.finish_reason, FinishReason::kLength);
      }
      EXPECT_GT(engine.stats().preemptions, 0);
      EXPECT_EQ(engine.stats().running, 0);
    }
  }
}

// Admission: a request whose prompt and max_new_tokens could outgrow the whole pool is refused at
// Submit, naming the numbers, instead of failing part-way; one that just fits runs.
TEST(EngineTest, ARequestThatCannotFitAloneIsRefusedAtSubmit) {
  FakeCausalLM model;
  EngineConfig c = SmallConfig();
  c.max_total_tokens = 32;
  Engine engine(&model, c);
  Collector collector;
  try {
    collector.Submit(engine, MakePrompt(1, 20, model.vocab_size()), Greedy(14));
    ADD_FAILURE() << "20 prompt tokens + 14 new ones - 1 = 33 > 32 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs up to 33 tokens of KV cache"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--max-total-tokens"), std::string::npos) << e.what();
  }
  // 20 + 13 - 1 = 32 rows fill the pool exactly: the 13th token is sampled from the last row.
  const auto big = collector.Submit(engine, MakePrompt(1, 20, model.vocab_size()), Greedy(13));
  const auto small = collector.Submit(engine, MakePrompt(2, 5, model.vocab_size()), Greedy(3));
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(big)[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(collector.results(big)[0].tokens, model.ReferenceGreedy(MakePrompt(1, 20, model.vocab_size()), 13));
  EXPECT_EQ(collector.results(small)[0].tokens, model.ReferenceGreedy(MakePrompt(2, 5, model.vocab_size()), 3));
  EXPECT_EQ(engine.CheckPageAccounting(), "");
}

TEST(EngineTest, AbortFreesPagesAtTheEndOfTheStep) {
  FakeCausalLM model;
  EngineConfig c = SmallConfig();
  c.disable_radix_cache = true;
  Engine engine(&model, c);
  Collector collector;
  const auto keep = collector.Submit(engine, MakePrompt(1, 30, model.vocab_size()), Greedy(10));
  const auto running = collector.Submit(engine, MakePrompt(2, 30, model.vocab_size()), Greedy(1000));
  engine.Step();
  engine.Step();
  const std::int32_t free_before = engine.stats().free_pages;
  engine.Abort(running);
  const auto waiting = collector.Submit(engine, MakePrompt(3, 30, model.vocab_size()), Greedy(10));
  engine.Abort(waiting);  // aborted before it ever ran
  engine.Abort(12345);    // unknown ids are ignored
  engine.Step();
  EXPECT_GT(engine.stats().free_pages, free_before);
  EXPECT_EQ(engine.CheckPageAccounting(), "");
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(running)[0].finish_reason, FinishReason::kAbort);
  EXPECT_EQ(collector.results(running)[0].error, "");
  EXPECT_EQ(collector.results(running)[0].tokens.size(), 2u);
  EXPECT_EQ(collector.results(waiting)[0].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(collector.results(waiting)[0].tokens.empty());
  EXPECT_EQ(collector.results(keep)[0].tokens, model.ReferenceGreedy(MakePrompt(1, 30, model.vocab_size()), 10));
  EXPECT_EQ(engine.stats().free_pages, engine.num_pages());
}

TEST(EngineTest, AModelFailureAbortsTheStepsRequestsAndTheEngineGoesOn) {
  FakeCausalLM model;
  Engine engine(&model, SmallConfig());
  Collector collector;
  const auto a = collector.Submit(engine, MakePrompt(1, 10, model.vocab_size()), Greedy(5));
  engine.Step();
  model.FailNextForward();
  engine.Step();
  EXPECT_EQ(collector.results(a)[0].finish_reason, FinishReason::kAbort);
  EXPECT_NE(collector.results(a)[0].error.find("injected failure"), std::string::npos);
  const auto b = collector.Submit(engine, MakePrompt(1, 10, model.vocab_size()), Greedy(5));
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(b)[0].tokens, model.ReferenceGreedy(MakePrompt(1, 10, model.vocab_size()), 5));
  EXPECT_EQ(engine.CheckPageAccounting(), "");
}

TEST(EngineTest, FirstComeFirstServedUnderTheRunningLimit) {
  FakeCausalLM model;
  EngineConfig c = SmallConfig();
  c.max_running_requests = 2;
  Engine engine(&model, c);
  std::vector<std::int64_t> first_token_order;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 8; ++i) {
    Request r;
    // Later requests are shorter: FCFS must not let them overtake.
    r.prompt_ids = MakePrompt(i, 40 - 4 * i, model.vocab_size());
    r.params = Greedy(3 + (i % 3));
    r.callback = [&first_token_order](const RequestOutput& out) {
      if (out.completion_tokens == static_cast<std::int32_t>(out.token_ids.size()) && !out.token_ids.empty())
        first_token_order.push_back(out.request_id);
    };
    ids.push_back(engine.Submit(std::move(r)));
  }
  int max_running = 0;
  while (engine.HasWork()) {
    engine.Step();
    max_running = std::max(max_running, engine.stats().running);
  }
  EXPECT_EQ(first_token_order, ids);
  EXPECT_EQ(max_running, 2);
}

TEST(EngineTest, ContextLengthEndsGeneration) {
  FakeCausalLM model(101, 2, /*max_positions=*/40);
  Engine engine(&model, SmallConfig());
  Collector collector;
  const auto id = collector.Submit(engine, MakePrompt(1, 30, model.vocab_size()), Greedy(100));
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(id)[0].tokens.size(), 10u);
  EXPECT_EQ(collector.results(id)[0].finish_reason, FinishReason::kLength);
}

TEST(EngineTest, SubmitRejectsInvalidRequestsNamingTheField) {
  FakeCausalLM model(101, 2, 100);
  EngineConfig c = SmallConfig();
  c.max_total_tokens = 64;
  Engine engine(&model, c);
  auto message = [&](std::vector<std::int32_t> prompt, SamplingParams params) -> std::string {
    Request r;
    r.prompt_ids = std::move(prompt);
    r.params = params;
    try {
      engine.Submit(std::move(r));
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({}, Greedy(1)).find("prompt_ids"), std::string::npos);
  EXPECT_NE(message({1, 101}, Greedy(1)).find("prompt_ids[1] must be in [0, 101)"), std::string::npos);
  EXPECT_NE(message({1, -1}, Greedy(1)).find("prompt_ids[1]"), std::string::npos);
  EXPECT_NE(message(MakePrompt(1, 100, 101), Greedy(1)).find("context length 100"), std::string::npos);
  EXPECT_NE(message(MakePrompt(1, 65, 101), Greedy(1)).find("--max-total-tokens"), std::string::npos);
  SamplingParams bad = Greedy(1);
  bad.top_p = 0;
  EXPECT_NE(message({1}, bad).find("top_p"), std::string::npos);
  SamplingParams stop = Greedy(1);
  stop.stop = {"x"};
  EXPECT_NE(message({1}, stop).find("stop strings need a tokenizer"), std::string::npos);
  EXPECT_FALSE(engine.HasWork());
}

TEST(EngineTest, BackgroundThreadServesSubmissionsFromManyThreads) {
  FakeCausalLM model;
  Engine engine(&model, SmallConfig());
  engine.Start();
  constexpr int kThreads = 4, kPerThread = 5;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::pair<int, int>, std::vector<std::int32_t>> got;
  int done = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        Request r;
        r.prompt_ids = MakePrompt(t * 100 + k, 5 + k * 7, model.vocab_size());
        r.params = Greedy(6);
        r.callback = [&, t, k](const RequestOutput& out) {
          std::lock_guard<std::mutex> lock(mu);
          auto& v = got[{t, k}];
          v.insert(v.end(), out.token_ids.begin(), out.token_ids.end());
          if (out.finished) {
            ++done;
            cv.notify_all();
          }
        };
        engine.Submit(std::move(r));
      }
    });
  }
  for (auto& th : threads) th.join();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return done == kThreads * kPerThread; }));
  }
  engine.Stop();
  for (int t = 0; t < kThreads; ++t)
    for (int k = 0; k < kPerThread; ++k)
      EXPECT_EQ((got[{t, k}]), model.ReferenceGreedy(MakePrompt(t * 100 + k, 5 + k * 7, model.vocab_size()), 6));
  EXPECT_FALSE(engine.HasWork());
}

TEST(EngineTest, StepWithoutWorkReturnsFalse) {
  FakeCausalLM model;
  Engine engine(&model, SmallConfig());
  EXPECT_FALSE(engine.Step());
  EXPECT_EQ(model.forward_calls(), 0);
}


class ThrowingDetokenizer : public Detokenizer {
 public:
  explicit ThrowingDetokenizer(std::int32_t bad) : bad_(bad) {}
  std::string Decode(const std::vector<std::int32_t>& ids) const override {
    for (std::int32_t id : ids)
      if (id == bad_) throw std::runtime_error("bad bytes");
    return std::string(ids.size(), 'x');
  }

 private:
  std::int32_t bad_;
};

TEST(EngineTest, ADetokenizerFailureAbortsOnlyThatSequence) {
  FakeCausalLM model;
  const auto prompt_a = MakePrompt(1, 10, model.vocab_size()), prompt_b = MakePrompt(2, 10, model.vocab_size());
  const std::int32_t bad = model.ReferenceGreedy(prompt_a, 5)[2];
  const auto greedy_b = model.ReferenceGreedy(prompt_b, 2);
  ASSERT_EQ(std::count(greedy_b.begin(), greedy_b.end(), bad), 0);
  ThrowingDetokenizer detok(bad);
  Engine engine(&model, SmallConfig(), &detok);
  Collector collector;
  const auto a = collector.Submit(engine, prompt_a, Greedy(5));
  const auto b = collector.Submit(engine, prompt_b, Greedy(2));
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(a)[0].finish_reason, FinishReason::kAbort);
  EXPECT_NE(collector.results(a)[0].error.find("bad bytes"), std::string::npos);
  EXPECT_EQ(collector.results(b)[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(collector.results(b)[0].text, "xx");
  EXPECT_EQ(engine.CheckPageAccounting(), "");
}

TEST(EngineTest, FlushCacheFreesEveryCachedPageNoSequenceUses) {
  FakeCausalLM model;
  Engine engine(&model, SmallConfig());
  Collector collector;
  collector.Submit(engine, MakePrompt(1, 40, model.vocab_size()), Greedy(4));
  engine.RunUntilIdle();
  ASSERT_GT(engine.stats().cached_pages, 0);
  // A running request keeps its pages (and the cached ones on its path) through a flush.
  const auto running = collector.Submit(engine, MakePrompt(2, 30, model.vocab_size()), Greedy(6));
  engine.Step();
  engine.RequestFlushCache();
  engine.Step();
  EXPECT_EQ(engine.CheckPageAccounting(), "");
  EXPECT_EQ(engine.stats().cached_pages, 7);  // the running request's 7 full pages
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(running)[0].tokens, model.ReferenceGreedy(MakePrompt(2, 30, model.vocab_size()), 6));
  engine.RequestFlushCache();
  engine.RunUntilIdle();
  EXPECT_EQ(engine.stats().cached_pages, 0);
  EXPECT_EQ(engine.stats().free_pages, engine.num_pages());
}

}  // namespace
}  // namespace fission::engine
