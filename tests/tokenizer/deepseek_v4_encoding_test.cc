#include "tokenizer/deepseek_v4_encoding.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/corpus_testlib.h"
#include "tokenizer/deepseek_encoding_testlib.h"
#include "tokenizer/test_paths.h"

namespace fission::tokenizer {
namespace {

using nlohmann::ordered_json;

ordered_json Fixture() { return testing::EncodingFixture("dsv4_encoding.json"); }

DeepSeekV4Options EncoderOptions(const ordered_json& c) {
  DeepSeekV4Options o;
  o.thinking = c["thinking_mode"] == "thinking";
  if (c.contains("drop_thinking")) o.drop_thinking = c["drop_thinking"].get<bool>();
  if (c.contains("add_default_bos_token")) o.add_bos_token = c["add_default_bos_token"].get<bool>();
  if (c["reasoning_effort"].is_string()) o.reasoning_effort = c["reasoning_effort"].get<std::string>();
  return o;
}

// What the C++ side makes of a case: the server's renderer for a request, the bare encoder else.
std::string Render(const ordered_json& c) {
  if (c["kind"] == "request")
    return DeepSeekV4Encoding().Apply(c["messages"], testing::RequestOptions(c), TokenizerConfig());
  return EncodeDeepSeekV4(c["messages"], EncoderOptions(c));
}

// Recorded from the reference encoder (tools/golden/make_dsv4_encoding_goldens.py).
TEST(DeepSeekV4Encoding, MatchesTheReferenceEncoder) { testing::ExpectMatchesReference(Fixture(), Render, 55, 14); }

TEST(DeepSeekV4Encoding, EncoderAloneMatchesOnShapedRequests) {
  testing::ExpectEncoderMatchesShapedRequests(
      Fixture(), [](const ordered_json& c) { return EncodeDeepSeekV4(c["encoder_messages"], EncoderOptions(c)); }, 35);
}

ordered_json Case(const std::string& name) {
  const ordered_json fixture = Fixture();
  for (const ordered_json& c : fixture["cases"])
    if (c["name"] == name) return c;
  ADD_FAILURE() << "no case " << name;
  return ordered_json::object();
}

// What sets V4 apart from V3.2, spelled out: tool results are user turns of <tool_result> blocks,
// in the order of the calls they answer, and calls close with </｜DSML｜tool_calls>.
TEST(DeepSeekV4Encoding, ToolResultsAreUserTurnsInCallOrder) {
  const std::string out = Render(Case("tool results answered out of order are sorted by call"));
  const std::size_t hot = out.find("<tool_result>hot</tool_result>");
  const std::size_t mild = out.find("<tool_result>mild</tool_result>");
  const std::size_t cold = out.find("<tool_result>cold</tool_result>");
  ASSERT_NE(hot, std::string::npos);
  EXPECT_LT(hot, mild);
  EXPECT_LT(mild, cold);
  EXPECT_NE(out.find("<｜User｜><tool_result>hot</tool_result>\n\n<tool_result>mild"), std::string::npos);
  EXPECT_NE(out.find("</｜DSML｜tool_calls><｜end▁of▁sentence｜>"), std::string::npos);
}

TEST(DeepSeekV4Encoding, MaxEffortPrecedesTheFirstMessageInThinkingMode) {
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
  ChatRenderOptions o;
  o.add_generation_prompt = true;
  o.extra = ordered_json::parse(R"({"thinking": true, "reasoning_effort": "max"})");
  const std::string max = DeepSeekV4Encoding().Apply(messages, o, TokenizerConfig());
  EXPECT_EQ(max.rfind("<｜begin▁of▁sentence｜>Reasoning Effort: Absolute maximum", 0), 0u) << max;
  EXPECT_NE(max.find("unchecked.\n\n<｜User｜>Hi<｜Assistant｜><think>"), std::string::npos) << max;
  // "high" and the dropped values add nothing; chat mode ignores the effort.
  for (const char* effort : {R"("high")", R"("medium")", "null"}) {
    o.extra = ordered_json::parse(StrCat(R"({"thinking": true, "reasoning_effort": )", effort, "}"));
    EXPECT_EQ(DeepSeekV4Encoding().Apply(messages, o, TokenizerConfig()),
              "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜><think>") << effort;
  }
  o.extra = ordered_json::parse(R"({"reasoning_effort": "max"})");
  EXPECT_EQ(DeepSeekV4Encoding().Apply(messages, o, TokenizerConfig()),
            "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>");
}

TEST(DeepSeekV4Encoding, RefusalsSayWhichMessage) {
  const ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "Q"},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "[1]"}}]}])");
  try {
    EncodeDeepSeekV4(messages, {});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(EncodeDeepSeekV4(ordered_json::object(), {}), Error);
  EXPECT_THROW(EncodeDeepSeekV4(ordered_json::parse("[3]"), {}), Error);
  DeepSeekV4Options low;
  low.reasoning_effort = "low";
  EXPECT_THROW(EncodeDeepSeekV4(ordered_json::parse(R"([{"role": "user", "content": "Q"}])"), low), Error);
  // Nothing before the assistant message to continue.
  EXPECT_THROW(DeepSeekV4Encoding().Apply(ordered_json::parse(R"([{"role": "assistant", "content": "x"}])"), {},
                                          TokenizerConfig()),
               Error);
}

TEST(ChatRendererForModel, DeepSeekV4GetsTheEncoderUnlessATemplateIsNamed) {
  TokenizerConfig shipped;
  shipped.chat_template = "S{{ messages[0]['content'] }}";
  auto native = ChatRendererForModel(shipped, std::nullopt, "deepseek_v4");
  EXPECT_NE(dynamic_cast<const DeepSeekV4Encoding*>(native.get()), nullptr);
  EXPECT_EQ(dynamic_cast<const DeepSeekV4Encoding*>(ChatRendererForModel(shipped, std::nullopt, "deepseek_v3").get()),
            nullptr);
  // --chat-template still wins.
  const std::string file = (std::filesystem::temp_directory_path() / "fission_dsv4_test.jinja").string();
  std::ofstream(file) << "T{{ messages[0]['content'] }}";
  auto overridden = ChatRendererForModel(shipped, file, "deepseek_v4");
  EXPECT_EQ(overridden->Apply(ordered_json::parse(R"([{"role": "user", "content": "hi"}])"), {}, shipped), "Thi");
  std::remove(file.c_str());
  EXPECT_EQ(ModelTypeOf(testing::SourceDir() + "/tests/fixtures/recipes/models/deepseek_v4"), "deepseek_v4");
}

}  // namespace
}  // namespace fission::tokenizer
