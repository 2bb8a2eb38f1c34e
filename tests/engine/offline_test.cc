// The offline front end: JSON-lines prompts with per-line sampling parameters, id lists, EOS ids
// from a checkpoint, engine flags, and a run with its report.
#include "engine/offline.h"

#include <gtest/gtest.h>

#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::FakeCausalLM;

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OfflineTest, ParsesPromptsWithPerLineSamplingParams) {
  SamplingParams defaults;
  defaults.temperature = 0;
  defaults.max_new_tokens = 9;
  const std::string jsonl =
      "{\"input_ids\": [1, 2, 3]}\n"
      "\n"
      "{\"input_ids\": [4], \"sampling_params\": {\"temperature\": 0.7, \"top_p\": 0.9, \"top_k\": 5, \"min_p\": 0.1,"
      " \"seed\": 11, \"max_new_tokens\": 3, \"min_new_tokens\": 1, \"stop\": \"x\", \"stop_token_ids\": [7],"
      " \"ignore_eos\": true, \"n\": 2, \"repetition_penalty\": 1.1, \"frequency_penalty\": 0.5,"
      " \"presence_penalty\": -0.5, \"logprobs\": true, \"top_logprobs\": 2, \"prompt_logprobs\": true}}\n"
      "{\"text\": \"hello\", \"sampling_params\": {\"stop\": [\"a\", \"b\"], \"sampling_seed\": 5}}\n";
  const auto encode = [](const std::string& text) { return std::vector<std::int32_t>(text.size(), 42); };
  const auto prompts = ParsePromptsJsonl(jsonl, "in.jsonl", defaults, encode);
  ASSERT_EQ(prompts.size(), 3u);
  EXPECT_EQ(prompts[0].prompt_ids, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(prompts[0].params.max_new_tokens, 9);
  EXPECT_EQ(prompts[0].params.temperature, 0.0);
  const SamplingParams& p = prompts[1].params;
  EXPECT_EQ(p.temperature, 0.7);
  EXPECT_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_EQ(p.min_p, 0.1);
  EXPECT_EQ(p.seed, 11u);
  EXPECT_EQ(p.max_new_tokens, 3);
  EXPECT_EQ(p.min_new_tokens, 1);
  EXPECT_EQ(p.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(p.stop_token_ids, std::vector<std::int32_t>{7});
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.repetition_penalty, 1.1);
  EXPECT_EQ(p.frequency_penalty, 0.5);
  EXPECT_EQ(p.presence_penalty, -0.5);
  EXPECT_TRUE(p.logprobs);
  EXPECT_EQ(p.top_logprobs, 2);
  EXPECT_TRUE(p.prompt_logprobs);
  EXPECT_EQ(prompts[2].prompt_ids, std::vector<std::int32_t>(5, 42));
  EXPECT_EQ(prompts[2].params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(prompts[2].params.seed, 5u);
}

TEST(OfflineTest, MalformedLinesNameTheLineAndField) {
  const SamplingParams d;
  auto parse = [&](const std::string& text) { return ErrorOf([&] { ParsePromptsJsonl(text, "f.jsonl", d, nullptr); }); };
  EXPECT_NE(parse("{\"input_ids\": [1]}\n{bad\n").find("f.jsonl line 2"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1, \"x\"]}").find("input_ids'[1]"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [-1]}").find("token id >= 0"), std::string::npos);
  EXPECT_NE(parse("{\"text\": \"hi\"}").find("needs a tokenizer"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"text\": \"x\"}").find("exactly one"), std::string::npos);
  EXPECT_NE(parse("{\"prompt\": [1]}").find("unknown field 'prompt'"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"top_p\": \"high\"}}").find("'top_p' must be a number"),
            std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"stop\": 3}}").find("'stop'"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"seed\": -1}}").find("'seed' must be >= 0"),
            std::string::npos);
}

TEST(OfflineTest, IdListsAndEosIds) {
  EXPECT_EQ(ParseIdList("1,2, 3", "--prompt-ids"), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(ParseIdList("7", "--prompt-ids"), std::vector<std::int32_t>{7});
  for (const char* bad : {"", "1,,2", "1,x", "-1", "1,"})
    EXPECT_NE(ErrorOf([&] { ParseIdList(bad, "--prompt-ids"); }).find("--prompt-ids"), std::string::npos) << bad;
  EXPECT_EQ(ReadEosTokenIds(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3"),
            std::vector<std::int32_t>{1});
  EXPECT_TRUE(ReadEosTokenIds("/nonexistent").empty());
}

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
  const std::string json = CompletionJson(2, 1, report.outputs[2][1], false);
  const Json parsed = ParseJson(json, "completion");
  EXPECT_EQ(parsed["index"], 2);
  EXPECT_EQ(parsed["completion"], 1);
  EXPECT_EQ(parsed["finish_reason"], "length");
  EXPECT_EQ(parsed["output_ids"].get<std::vector<std::int32_t>>(), report.outputs[2][1].token_ids);
  EXPECT_EQ(parsed["logprobs"].size(), 6u);
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
