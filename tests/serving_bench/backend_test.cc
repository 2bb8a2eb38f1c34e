// What each backend sends (token-id prompts, LoRA adapters) and what counts as a token: the
// first chunk with non-empty content, as bench_serving measures it.
#include "serving_bench/backend.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace fission::serving_bench {
namespace {

using http::Clock;

Clock::time_point At(double ms) {
  return Clock::time_point() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

Json Body(const std::string& backend, const DatasetRow& row) {
  RequestSettings s;
  s.model = "m";
  return Json::parse(BuildRequestBody(Backend::Parse(backend), s, row));
}

TEST(BackendTest, TokenIdPromptsAreSentAsIds) {
  DatasetRow row{"text", 3, 8, {5, 6, 7}, ""};
  EXPECT_EQ(Body("openai", row)["prompt"], Json::array({5, 6, 7}));
  const Json native = Body("sglang", row);
  EXPECT_EQ(native["input_ids"], Json::array({5, 6, 7}));
  EXPECT_FALSE(native.contains("text"));
  EXPECT_THROW(Body("openai-chat", row), Error);
  row.prompt_ids.clear();
  EXPECT_EQ(Body("openai", row)["prompt"], "text");
  EXPECT_EQ(Body("sglang", row)["text"], "text");
}

TEST(BackendTest, LoraNamesTheAdapterAsBenchServingDoes) {
  DatasetRow row{"p", 1, 4, {}, ""};
  row.lora_name = "adapter-a";
  for (const char* backend : {"openai", "openai-chat"}) {
    const Json b = Body(backend, row);
    EXPECT_EQ(b["model"], "adapter-a") << backend;
    EXPECT_EQ(b["lora_path"], "adapter-a") << backend;
  }
  const Json native = Body("sglang", row);
  EXPECT_EQ(native["lora_path"], "adapter-a");
  EXPECT_FALSE(native.contains("model"));
  row.lora_name.clear();
  EXPECT_FALSE(Body("openai", row).contains("lora_path"));
}

// Feeds SSE lines, one per (time, JSON) pair.
RequestOutput Measure(const std::string& backend, const std::vector<std::pair<double, std::string>>& lines) {
  StreamMeasurer m(Backend::Parse(backend), true, At(0), 3);
  m.OnStatus(200);
  for (const auto& [ms, json] : lines) m.OnData("data: " + json + "\n\n", At(ms));
  m.OnData("data: [DONE]\n\n", At(lines.back().first + 5));
  return m.Finish("", At(lines.back().first + 5));
}

TEST(BackendTest, ChatTtftIsTheFirstContentChunkNotReasoning) {
  const RequestOutput o = Measure(
      "openai-chat", {{10, R"({"choices":[{"delta":{"role":"assistant","content":""}}]})"},
                      {40, R"({"choices":[{"delta":{"reasoning_content":"think"}}]})"},
                      {70, R"({"choices":[{"delta":{"reasoning_content":"more"}}]})"},
                      {100, R"({"choices":[{"delta":{"content":"4"}}]})"},
                      {130, R"({"choices":[{"delta":{"content":"2"}}]})"},
                      {150, R"({"choices":[],"usage":{"completion_tokens":4}})"}});
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_DOUBLE_EQ(o.ttft, 0.1);
  ASSERT_EQ(o.itl.size(), 1u);
  EXPECT_DOUBLE_EQ(o.itl[0], 0.03);
  EXPECT_EQ(o.generated_text, "42");
  EXPECT_DOUBLE_EQ(o.latency, 0.155);  // to [DONE]
  EXPECT_EQ(o.usage_output_tokens, 4);
}

TEST(BackendTest, ReasoningOnlyChatIsAFailureThatSaysWhy) {
  const RequestOutput o =
      Measure("openai-chat", {{10, R"({"choices":[{"delta":{"reasoning_content":"think"}}]})"}});
  EXPECT_FALSE(o.success);
  EXPECT_NE(o.error.find("reasoning_content is not counted"), std::string::npos) << o.error;
}

TEST(BackendTest, CompletionTtftSkipsEmptyTextChunks) {
  const RequestOutput o = Measure("openai", {{20, R"({"choices":[{"text":""}]})"},
                                             {60, R"({"choices":[{"text":"a"}]})"},
                                             {90, R"({"choices":[{"text":"b"}]})"}});
  EXPECT_DOUBLE_EQ(o.ttft, 0.06);
  EXPECT_EQ(o.generated_text, "ab");
}

}  // namespace
}  // namespace fission::serving_bench
