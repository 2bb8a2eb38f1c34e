#include "tokenizer/deepseek_v32_encoding.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/corpus_testlib.h"
#include "tokenizer/deepseek_encoding_testlib.h"
#include "tokenizer/test_paths.h"

namespace fission::tokenizer {
namespace {

using nlohmann::ordered_json;

ordered_json Fixture() { return testing::EncodingFixture("dsv32_encoding.json"); }

DeepSeekV32Options EncoderOptions(const ordered_json& c) {
  DeepSeekV32Options o;
  o.thinking = c["thinking_mode"] == "thinking";
  if (c.contains("drop_thinking")) o.drop_thinking = c["drop_thinking"].get<bool>();
  if (c.contains("add_default_bos_token")) o.add_bos_token = c["add_default_bos_token"].get<bool>();
  return o;
}

// What the C++ side makes of a case: the server's renderer for a request, the bare encoder else.
std::string Render(const ordered_json& c) {
  if (c["kind"] == "request")
    return DeepSeekV32Encoding().Apply(c["messages"], testing::RequestOptions(c), TokenizerConfig());
  return EncodeDeepSeekV32(c["messages"], EncoderOptions(c));
}

// Recorded from the reference encoder (tools/golden/make_dsv32_encoding_goldens.py).
TEST(DeepSeekV32Encoding, MatchesTheReferenceEncoder) { testing::ExpectMatchesReference(Fixture(), Render, 30, 6); }

TEST(DeepSeekV32Encoding, EncoderAloneMatchesOnShapedRequests) {
  testing::ExpectEncoderMatchesShapedRequests(
      Fixture(), [](const ordered_json& c) { return EncodeDeepSeekV32(c["encoder_messages"], EncoderOptions(c)); }, 20);
}

TEST(DeepSeekV32Encoding, ThinkingOpensTheBlockAndDropsEarlierReasoning) {
  const ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "A1", "reasoning_content": "old thoughts"},
    {"role": "user", "content": "Q2"}])");
  ChatRenderOptions thinking;
  thinking.add_generation_prompt = true;
  thinking.extra = ordered_json::parse(R"({"thinking": true})");
  const std::string prompt = DeepSeekV32Encoding().Apply(messages, thinking, TokenizerConfig());
  EXPECT_EQ(prompt,
            "<｜begin▁of▁sentence｜><｜User｜>Q1<｜Assistant｜></think>A1<｜end▁of▁sentence｜>"
            "<｜User｜>Q2<｜Assistant｜><think>");
  ChatRenderOptions chat = thinking;
  chat.extra = ordered_json::object();
  EXPECT_EQ(DeepSeekV32Encoding().Apply(messages, chat, TokenizerConfig()),
            prompt.substr(0, prompt.size() - 7) + "</think>");
}

TEST(DeepSeekV32Encoding, RefusalsSayWhichMessage) {
  const ordered_json messages = ordered_json::parse(R"([
    {"role": "user", "content": "Q"},
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "[1]"}}]}])");
  try {
    EncodeDeepSeekV32(messages, {});
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(EncodeDeepSeekV32(ordered_json::object(), {}), Error);
  EXPECT_THROW(EncodeDeepSeekV32(ordered_json::parse("[3]"), {}), Error);
  // Nothing before the assistant message to continue.
  ChatRenderOptions continued;
  EXPECT_THROW(DeepSeekV32Encoding().Apply(ordered_json::parse(R"([{"role": "assistant", "content": "x"}])"),
                                           continued, TokenizerConfig()),
               Error);
}

std::string TempTemplate() {
  const std::string path = (std::filesystem::temp_directory_path() / "fission_dsv32_test.jinja").string();
  std::ofstream(path) << "T{{ messages[0]['content'] }}";
  return path;
}

TEST(ChatRendererForModel, DeepSeekV32WithoutATemplateGetsTheEncoder) {
  TokenizerConfig none;
  auto native = ChatRendererForModel(none, std::nullopt, "deepseek_v32");
  EXPECT_NE(dynamic_cast<const DeepSeekV32Encoding*>(native.get()), nullptr);
  // --chat-template wins, and so does a template the tokenizer ships.
  const std::string file = TempTemplate();
  auto overridden = ChatRendererForModel(none, file, "deepseek_v32");
  EXPECT_NE(dynamic_cast<const ChatTemplate*>(overridden.get()), nullptr);
  const ordered_json messages = ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  EXPECT_EQ(overridden->Apply(messages, {}, none), "Thi");
  std::remove(file.c_str());
  TokenizerConfig shipped;
  shipped.chat_template = "S{{ messages | length }}";
  EXPECT_EQ(ChatRendererForModel(shipped, std::nullopt, "deepseek_v32")->Apply(messages, {}, shipped), "S1");
  // Other models still need a template.
  EXPECT_THROW(ChatRendererForModel(none, std::nullopt, "deepseek_v3"), Error);
}

TEST(ChatRendererForModel, ModelTypeComesFromConfigJson) {
  EXPECT_EQ(ModelTypeOf(testing::SourceDir() + "/tests/fixtures/recipes/models/deepseek_v32"), "deepseek_v32");
  EXPECT_EQ(ModelTypeOf(testing::SourceDir() + "/tests/fixtures/models/tiny-deepseek-v3"), "deepseek_v3");
  EXPECT_EQ(ModelTypeOf(testing::FixtureDir()), "");
}

}  // namespace
}  // namespace fission::tokenizer
