// Property test: random workloads (shared prefixes, small pools, chunking, aborts at random
// moments, evictions) keep every page accounted for after every step, and leave the pool either
// free or held by the prefix cache alone once all requests are done. Outputs stay those of the
// reference model.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::Collector;
using testing::FakeCausalLM;
using testing::Greedy;
using testing::MakePrompt;

TEST(PageAccountingTest, RandomWorkloadsAccountForEveryPage) {
  FakeCausalLM model(61);
  std::int64_t preemptions = 0, evictions = 0, aborts = 0, hits = 0;
  for (int scenario = 0; scenario < 40; ++scenario) {
    std::mt19937 rng(scenario);
    auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    EngineConfig c;
    c.page_size = uniform(1, 6);
    c.max_total_tokens = c.page_size * uniform(12, 40);
    c.chunked_prefill_size = uniform(0, 2) == 0 ? -1 : uniform(1, 30);
    c.max_prefill_tokens = uniform(8, 64);
    c.max_running_requests = uniform(1, 8);
    c.disable_radix_cache = uniform(0, 3) == 0;
    Engine engine(&model, c);
    Collector collector;
    const std::int64_t capacity = static_cast<std::int64_t>(engine.num_pages()) * c.page_size;
    std::vector<std::vector<std::int32_t>> shared = {MakePrompt(scenario, 24, 61), MakePrompt(scenario + 500, 13, 61)};
    struct Live {
      std::int64_t id;
      std::vector<std::int32_t> prompt;
      int max_new;
      bool aborted = false;
    };
    std::vector<Live> live;
    const int num_requests = uniform(4, 14);
    int submitted = 0, steps = 0;
    while (submitted < num_requests || engine.HasWork()) {
      if (submitted < num_requests && uniform(0, 2) == 0) {
        // Prefix-sharing prompts that fit the pool alone (prompt + output <= capacity).
        std::vector<std::int32_t> prompt;
        if (uniform(0, 1)) prompt = shared[uniform(0, 1)];
        const auto tail = MakePrompt(scenario * 100 + submitted, uniform(1, 12), 61);
        prompt.insert(prompt.end(), tail.begin(), tail.end());
        const int room = static_cast<int>(capacity - static_cast<std::int64_t>(prompt.size()));
        if (room < 1) prompt.resize(capacity - 1);
        const int max_new = uniform(1, std::max(1, std::min(20, static_cast<int>(capacity) - static_cast<int>(prompt.size()))));
        SamplingParams params = Greedy(max_new);
        params.n = uniform(1, 3) == 1 ? 2 : 1;  // held completions join once the prompt is computed
        live.push_back({collector.Submit(engine, prompt, params), prompt, max_new});
        ++submitted;
      }
      if (!live.empty() && uniform(0, 15) == 0) {
        Live& victim = live[uniform(0, static_cast<int>(live.size()) - 1)];
        engine.Abort(victim.id);
        victim.aborted = true;
      }
      engine.Step();
      ++steps;
      ASSERT_EQ(engine.CheckPageAccounting(), "") << "scenario " << scenario << " step " << steps;
      ASSERT_LT(steps, 20000) << "scenario " << scenario << " does not finish";
    }
    const EngineStats stats = engine.stats();
    preemptions += stats.preemptions;
    evictions += stats.evicted_pages;
    hits += stats.prefix_hit_tokens;
    EXPECT_EQ(stats.running + stats.waiting, 0);
    // Whatever is not free is held by the prefix cache alone.
    EXPECT_EQ(stats.free_pages + stats.cached_pages, engine.num_pages()) << "scenario " << scenario;
    for (const Live& l : live) {
      for (const auto& r : collector.results(l.id)) {
        EXPECT_EQ(r.finished_reports, 1);
        if (l.aborted && r.finish_reason == FinishReason::kAbort) {
          ++aborts;
          const auto expected = model.ReferenceGreedy(l.prompt, static_cast<int>(r.tokens.size()));
          EXPECT_EQ(r.tokens, expected) << "scenario " << scenario;
          continue;
        }
        EXPECT_EQ(r.finish_reason, FinishReason::kLength) << "scenario " << scenario << ": " << r.error;
        EXPECT_EQ(r.tokens, model.ReferenceGreedy(l.prompt, l.max_new)) << "scenario " << scenario;
      }
    }
  }
  // The scenarios exercise every path that moves pages.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(evictions, 0);
  EXPECT_GT(aborts, 0);
  EXPECT_GT(hits, 0);
  std::printf("preemptions %ld, evicted pages %ld, aborts %ld, prefix hit tokens %ld\n", static_cast<long>(preemptions),
              static_cast<long>(evictions), static_cast<long>(aborts), static_cast<long>(hits));
}

}  // namespace
}  // namespace fission::engine
