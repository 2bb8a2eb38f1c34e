// A chat choice's generated text split into reasoning, content and tool calls, streamed piece by
// piece, and assembled into the final assistant message.
#include <gtest/gtest.h>

#include "server/chat_output.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace fission::server {
namespace {

const char* kOutput =
    "The user wants the weather.</think>Checking now."
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

Json Tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
}

TEST(ChatOutput, ReasoningContentAndToolCallsStreamedOneCharacterAtATime) {
  auto reasoning = ReasoningParser::Create("deepseek-r1");
  auto tools = ToolCallParser::Create("deepseekv3");
  auto splitter = MakeParsedSplitter(reasoning.get(), /*in_reasoning=*/true, true, tools.get(),
                                     ToolSpecsFromJson(Tools()), 1);
  ChatMessageBuilder streamed;
  std::string reasoning_text, content_text;
  int tool_deltas = 0;
  const std::string text = kOutput;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const ChatDelta d = splitter->Feed(text.substr(i, 1));
    reasoning_text += d.reasoning;
    content_text += d.content;
    tool_deltas += static_cast<int>(d.tool_calls.size());
    streamed.Add(d);
  }
  streamed.Add(splitter->Finish());
  EXPECT_EQ(reasoning_text, "The user wants the weather.");
  EXPECT_EQ(content_text, "Checking now.");
  EXPECT_GE(tool_deltas, 1);
  const Json message = streamed.Message();
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  const Json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(call["function"]["arguments"].get<std::string>()), Json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(message["reasoning_content"], "The user wants the weather.");
  EXPECT_EQ(message["content"], "Checking now.");

  // The same text in one piece gives the same message (apart from nothing: ids share the seed).
  auto whole = MakeParsedSplitter(reasoning.get(), true, true, tools.get(), ToolSpecsFromJson(Tools()), 1);
  ChatMessageBuilder once;
  once.Add(whole->Feed(text));
  once.Add(whole->Finish());
  EXPECT_EQ(once.Message(), message);
}

// DeepSeek-V3.2 in thinking mode as SGLang serves it: deepseek-v3 reasoning, deepseekv32 tool calls.
TEST(ChatOutput, DeepSeekV32ThinkingThenDsmlToolCall) {
  auto reasoning = ReasoningParser::Create("deepseek-v3");
  auto tools = ToolCallParser::Create("deepseekv32");
  const std::string text =
      "Need the weather.</think>Checking.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜function_calls>";
  auto split = [&](bool by_character) {
    auto splitter = MakeParsedSplitter(reasoning.get(), reasoning->StartsInReasoning(Json{{"thinking", true}}), true,
                                       tools.get(), ToolSpecsFromJson(Tools()), 1);
    ChatMessageBuilder b;
    if (by_character) {
      for (std::size_t i = 0; i < text.size(); ++i) b.Add(splitter->Feed(text.substr(i, 1)));
    } else {
      b.Add(splitter->Feed(text));
    }
    b.Add(splitter->Finish());
    return b.Message();
  };
  const Json message = split(true);
  EXPECT_EQ(message["reasoning_content"], "Need the weather.");
  EXPECT_EQ(message["content"], "Checking.");
  ASSERT_EQ(message["tool_calls"].size(), 1u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(split(false), message);
}

TEST(ChatOutput, PlainSplitterKeepsEverythingAsContent) {
  auto splitter = MakePlainSplitter();
  ChatMessageBuilder b;
  b.Add(splitter->Feed("<think>x</think>y"));
  b.Add(splitter->Finish());
  EXPECT_EQ(b.Message()["content"], "<think>x</think>y");
  EXPECT_TRUE(b.Message()["reasoning_content"].is_null());
  EXPECT_FALSE(b.Message().contains("tool_calls"));
}

}  // namespace
}  // namespace fission::server
