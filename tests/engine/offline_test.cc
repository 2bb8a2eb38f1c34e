// The offline runner (engine flags, and a run with its report); its JSON lines are tested in
// tests/server/generate_io_test.cc.
#include "engine/offline.h"

#include <gtest/gtest.h>

#include "common/error_message.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::FakeCausalLM;

std::string ErrorOf(const std::function<void()>& f) { return testing_util::ErrorMessageOf(f); }

TEST(OfflineTest, EngineFlagsUseSGLangNames) {
  EngineConfig c;
  const std::vector<std::string> args = {"--page-size",          "8",    "--max-total-tokens=1000", "--chunked-prefill-size",
                                         "-1",                   "--max-prefill-tokens", "512", "--max-running-requests",
                                         "3",                    "--disable-radix-cache", "--random-seed", "9",
                                         "--context-length",     "77",   "--other"};
  std::size_t i = 0;
  while (i < args.size() && ParseEngineFlag(args, &i, &c)) {
  }
  EXPECT_EQ(i, args.size() - 1);  // stops at the unknown flag
  EXPECT_EQ(c.page_size, 8);
  EXPECT_EQ(c.max_total_tokens, 1000);
  EXPECT_EQ(c.chunked_prefill_size, -1);
  EXPECT_EQ(c.max_prefill_tokens, 512);
  EXPECT_EQ(c.max_running_requests, 3);
  EXPECT_TRUE(c.disable_radix_cache);
  EXPECT_EQ(c.random_seed, 9u);
  EXPECT_EQ(c.context_length, 77);
  std::vector<std::string> bad = {"--page-size", "big"};
  i = 0;
  EXPECT_NE(ErrorOf([&] { ParseEngineFlag(bad, &i, &c); }).find("--page-size expects an integer"), std::string::npos);
  bad = {"--max-running-requests"};
  i = 0;
  EXPECT_NE(ErrorOf([&] { ParseEngineFlag(bad, &i, &c); }).find("needs a value"), std::string::npos);
  EngineConfig zero;
  zero.max_running_requests = 0;
  EXPECT_NE(ErrorOf([&] { zero.Validate(); }).find("--max-running-requests must be >= 1"), std::string::npos);
}

TEST(OfflineTest, RunOfflineReportsOutputsAndThroughput) {
  FakeCausalLM model;
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 2048;
  Engine engine(&model, c);
  std::vector<OfflinePrompt> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back({testing::MakePrompt(i, 10 + i, 101), testing::Greedy(6)});
  prompts[2].params.n = 2;
  prompts[2].params.logprobs = true;
  const OfflineReport report = RunOffline(engine, prompts);
  ASSERT_EQ(report.outputs.size(), 5u);
  ASSERT_EQ(report.outputs[2].size(), 2u);
  for (std::size_t i = 0; i < prompts.size(); ++i)
    for (const OfflineCompletion& comp : report.outputs[i]) {
      EXPECT_EQ(comp.token_ids, model.ReferenceGreedy(prompts[i].prompt_ids, 6));
      EXPECT_EQ(comp.finish_reason, FinishReason::kLength);
    }
  EXPECT_EQ(report.prompt_tokens, 10 + 11 + 12 + 13 + 14);
  EXPECT_EQ(report.stats.generated_tokens, 6 * 6);
  EXPECT_EQ(report.outputs[2][1].logprobs.size(), 6u);
  const std::string summary = ThroughputSummary(report);
  EXPECT_NE(summary.find("prefill:"), std::string::npos);
  EXPECT_NE(summary.find("decode:"), std::string::npos);
  EXPECT_NE(summary.find("generated tokens: 36"), std::string::npos);
  // An invalid prompt is named and nothing is left running.
  std::vector<OfflinePrompt> bad = {prompts[0], {{1, 500}, testing::Greedy(2)}};
  EXPECT_NE(ErrorOf([&] { RunOffline(engine, bad); }).find("prompt 1: prompt_ids[1]"), std::string::npos);
  EXPECT_FALSE(engine.HasWork());
}

}  // namespace
}  // namespace fission::engine
