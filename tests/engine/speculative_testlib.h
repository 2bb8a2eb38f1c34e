// What the speculative-decoding engine tests share: a job list's run through an engine (page
// accounting checked after every step and at the end) and the comparison of two runs' outputs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine::testing {

struct SpecJob {
  std::vector<std::int32_t> prompt;
  SamplingParams params;
};

inline std::vector<Collected> RunJobs(model::CausalLM* model, const EngineConfig& config,
                                      const std::vector<SpecJob>& jobs, EngineStats* stats = nullptr,
                                      const Detokenizer* detok = nullptr) {
  Engine engine(model, config, detok);
  Collector collector;
  std::vector<std::int64_t> ids;
  for (const SpecJob& j : jobs) ids.push_back(collector.Submit(engine, j.prompt, j.params));
  while (engine.HasWork()) {
    engine.Step();
    EXPECT_EQ(engine.CheckPageAccounting(), "");
  }
  EXPECT_EQ(engine.stats().free_pages + engine.stats().cached_pages, engine.num_pages());
  if (stats != nullptr) *stats = engine.stats();
  std::vector<Collected> out;
  for (std::int64_t id : ids) out.push_back(collector.results(id)[0]);
  return out;
}

inline void ExpectSameTokens(const std::vector<Collected>& a, const std::vector<Collected>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].finish_reason, b[i].finish_reason) << "request " << i;
    EXPECT_EQ(a[i].text, b[i].text) << "request " << i;
  }
}

}  // namespace fission::engine::testing
