// `fission generate`'s JSON lines: prompts with per-line sampling parameters, id lists, and the
// completion line; EOS ids from a checkpoint.
#include "server/generate_io.h"

#include <gtest/gtest.h>

#include "common/error_message.h"
#include "base/error.h"
#include "base/json.h"
#include "io/generation_config.h"

namespace fission::server {
namespace {

using engine::OfflineCompletion;
using engine::SamplingParams;

std::string ErrorOf(const std::function<void()>& f) { return testing_util::ErrorMessageOf(f); }

TEST(GenerateIoTest, ParsesPromptsWithPerLineSamplingParams) {
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

TEST(GenerateIoTest, MalformedLinesNameTheLineAndField) {
  const SamplingParams d;
  auto parse = [&](const std::string& text) { return ErrorOf([&] { ParsePromptsJsonl(text, "f.jsonl", d, nullptr); }); };
  EXPECT_NE(parse("{\"input_ids\": [1]}\n{bad\n").find("f.jsonl line 2"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1, \"x\"]}").find("input_ids'[1]"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [-1]}").find("token id in [0, 2^31)"), std::string::npos);
  EXPECT_NE(parse("{\"text\": \"hi\"}").find("needs a tokenizer"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"text\": \"x\"}").find("exactly one"), std::string::npos);
  EXPECT_NE(parse("{\"prompt\": [1]}").find("unknown field 'prompt'"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"top_p\": \"high\"}}").find("'top_p' must be a number"),
            std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"stop\": 3}}").find("'stop'"), std::string::npos);
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"seed\": -1}}").find("'seed' must be >= 0"),
            std::string::npos);
  // Structured outputs are the server's: fission generate names the field instead of ignoring it.
  EXPECT_NE(parse("{\"input_ids\": [1], \"sampling_params\": {\"regex\": \"a+\"}}")
                .find("'sampling_params.regex' (structured outputs) is served by `fission serve`"),
            std::string::npos);
}

TEST(GenerateIoTest, IdLists) {
  EXPECT_EQ(ParseIdList("1,2, 3", "--prompt-ids"), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(ParseIdList("7", "--prompt-ids"), std::vector<std::int32_t>{7});
  for (const char* bad : {"", "1,,2", "1,x", "-1", "1,"})
    EXPECT_NE(ErrorOf([&] { ParseIdList(bad, "--prompt-ids"); }).find("--prompt-ids"), std::string::npos) << bad;
}

TEST(GenerateIoTest, CompletionLine) {
  OfflineCompletion c;
  c.token_ids = {4, 5};
  c.finish_reason = engine::FinishReason::kLength;
  c.logprobs = {{4, -0.5f, {}}, {5, -1.5f, {{5, -1.5f}, {6, -2.0f}}}};
  const Json parsed = ParseJson(CompletionJson(2, 1, c, false), "completion");
  EXPECT_EQ(parsed["index"], 2);
  EXPECT_EQ(parsed["completion"], 1);
  EXPECT_EQ(parsed["finish_reason"], "length");
  EXPECT_EQ(parsed["output_ids"].get<std::vector<std::int32_t>>(), c.token_ids);
  ASSERT_EQ(parsed["logprobs"].size(), 2u);
  EXPECT_EQ(parsed["logprobs"][1]["top_logprobs"].size(), 2u);
  EXPECT_FALSE(parsed.contains("text"));
}

TEST(GenerationConfigTest, EosIds) {
  EXPECT_EQ(io::ReadEosTokenIds(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3"),
            std::vector<std::int32_t>{1});
  EXPECT_TRUE(io::ReadEosTokenIds("/nonexistent").empty());
}

}  // namespace
}  // namespace fission::server
