#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"

namespace fission::server {
namespace {

// Cuts `text` into pieces: every piece boundary in `cuts` (sorted byte offsets).
std::vector<std::string> Cut(const std::string& text, const std::vector<std::size_t>& cuts) {
  std::vector<std::string> pieces;
  std::size_t from = 0;
  for (std::size_t c : cuts) {
    pieces.push_back(text.substr(from, c - from));
    from = c;
  }
  pieces.push_back(text.substr(from));
  return pieces;
}

ReasoningResult StreamPieces(const ReasoningParser& parser, const std::vector<std::string>& pieces, bool in_reasoning,
                             bool stream_reasoning = true) {
  auto stream = parser.NewStream(in_reasoning, stream_reasoning);
  ReasoningResult r;
  for (const std::string& p : pieces) {
    ReasoningDelta d = stream->Feed(p);
    r.reasoning_content += d.reasoning;
    r.content += d.content;
  }
  ReasoningDelta d = stream->Finish();
  r.reasoning_content += d.reasoning;
  r.content += d.content;
  return r;
}

// Streaming at every single split point, one byte at a time and random chunkings gives Parse's result.
void ExpectStreamingAgrees(const ReasoningParser& parser, const std::string& text, bool in_reasoning) {
  const ReasoningResult whole = parser.Parse(text, in_reasoning);
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    ReasoningResult r = StreamPieces(parser, Cut(text, {cut}), in_reasoning);
    ASSERT_EQ(r.reasoning_content, whole.reasoning_content) << "cut at " << cut << " of: " << text;
    ASSERT_EQ(r.content, whole.content) << "cut at " << cut << " of: " << text;
  }
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
  ReasoningResult bytes = StreamPieces(parser, Cut(text, every), in_reasoning);
  EXPECT_EQ(bytes.reasoning_content, whole.reasoning_content);
  EXPECT_EQ(bytes.content, whole.content);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < text.size(); ++i)
      if (rng() % 4 == 0) cuts.push_back(i);
    for (bool stream_reasoning : {true, false}) {
      ReasoningResult r = StreamPieces(parser, Cut(text, cuts), in_reasoning, stream_reasoning);
      ASSERT_EQ(r.reasoning_content, whole.reasoning_content) << "trial " << trial;
      ASSERT_EQ(r.content, whole.content) << "trial " << trial;
    }
  }
}

TEST(ReasoningParserTest, FactoryKnowsEveryNameAndRejectsOthers) {
  for (const std::string& name : ReasoningParser::Names()) EXPECT_EQ(ReasoningParser::Create(name)->name(), name);
  try {
    ReasoningParser::Create("deepseek-r2");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("deepseek-r2"), std::string::npos);
    for (const std::string& name : ReasoningParser::Names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(ReasoningParserTest, WhenOutputStartsInsideThinking) {
  const Json none;
  const Json on = Json::parse(R"({"thinking": true, "enable_thinking": true})");
  const Json off = Json::parse(R"({"thinking": false, "enable_thinking": false})");
  auto r1 = ReasoningParser::Create("deepseek-r1");
  EXPECT_TRUE(r1->StartsInReasoning(none));
  EXPECT_TRUE(r1->StartsInReasoning(off));
  for (const char* name : {"deepseek-v3", "deepseek-v4"}) {
    auto p = ReasoningParser::Create(name);
    EXPECT_FALSE(p->StartsInReasoning(none)) << name;
    EXPECT_TRUE(p->StartsInReasoning(on)) << name;
    EXPECT_FALSE(p->StartsInReasoning(off)) << name;
    EXPECT_FALSE(p->StartsInReasoning(Json::parse(R"({"thinking": "yes"})"))) << name;
  }
  for (const char* name : {"glm45", "qwen3"}) {
    auto p = ReasoningParser::Create(name);
    EXPECT_TRUE(p->StartsInReasoning(none)) << name;
    EXPECT_TRUE(p->StartsInReasoning(on)) << name;
    EXPECT_FALSE(p->StartsInReasoning(off)) << name;
  }
}

TEST(ReasoningParserTest, DeepSeekR1WithoutOpeningTag) {
  auto p = ReasoningParser::Create("deepseek-r1");
  const std::string text = "Okay, 6 times 7.\nThat is 42.\n</think>\n\nThe answer is **42**.";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, "Okay, 6 times 7.\nThat is 42.\n");
  EXPECT_EQ(r.content, "\n\nThe answer is **42**.");
  ExpectStreamingAgrees(*p, text, true);
}

TEST(ReasoningParserTest, DeepSeekR1_0528EchoesOpeningTag) {
  auto p = ReasoningParser::Create("deepseek-r1");
  const std::string text = "<think>\nLet me compute.\n</think>\nIt is 42.";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, "\nLet me compute.\n");
  EXPECT_EQ(r.content, "\nIt is 42.");
  ExpectStreamingAgrees(*p, text, true);
}

TEST(ReasoningParserTest, TruncatedThinkingIsAllReasoning) {
  auto p = ReasoningParser::Create("deepseek-r1");
  const std::string text = "I need to think about </thi";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, text);
  EXPECT_EQ(r.content, "");
  ExpectStreamingAgrees(*p, text, true);
}

TEST(ReasoningParserTest, DeepSeekV3ThinksOnlyWhenAsked) {
  auto p = ReasoningParser::Create("deepseek-v3");
  // thinking off: the text is the answer even if it mentions the tags later.
  const std::string plain = "Paris is the capital. A </think> tag is just text here.";
  ReasoningResult off = p->Parse(plain, false);
  EXPECT_EQ(off.reasoning_content, "");
  EXPECT_EQ(off.content, plain);
  ExpectStreamingAgrees(*p, plain, false);
  // thinking on: the template opened the block.
  const std::string thought = "The user asks for the capital.</think>Paris.";
  ReasoningResult on = p->Parse(thought, true);
  EXPECT_EQ(on.reasoning_content, "The user asks for the capital.");
  EXPECT_EQ(on.content, "Paris.");
  ExpectStreamingAgrees(*p, thought, true);
}

// SGLang serves DeepSeek-V3.2 with --reasoning-parser deepseek-v3. Its encoder ends a thinking-mode
// prompt (a user turn or a block of tool results) with `<think>`, so the output starts inside the
// block; in chat mode the prompt ends with `</think>` and the output is the answer. Tool calls come
// after `</think>` and stay in the content for the deepseekv32 tool-call parser.
TEST(ReasoningParserTest, DeepSeekV32OutputsWithTheDeepSeekV3Parser) {
  auto p = ReasoningParser::Create("deepseek-v3");
  EXPECT_TRUE(p->StartsInReasoning(Json::parse(R"({"thinking": true})")));
  EXPECT_FALSE(p->StartsInReasoning(Json::parse(R"({"thinking": false})")));
  EXPECT_FALSE(p->StartsInReasoning(Json::object()));
  // As SGLang's `thinking is True`: only a JSON true starts inside the block.
  EXPECT_FALSE(p->StartsInReasoning(Json::parse(R"({"thinking": 1})")));
  const std::string call =
      "\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜function_calls>";
  const std::string thought = "The user wants the weather; call the tool.</think>" + call;
  ReasoningResult on = p->Parse(thought, true);
  EXPECT_EQ(on.reasoning_content, "The user wants the weather; call the tool.");
  EXPECT_EQ(on.content, call);
  ExpectStreamingAgrees(*p, thought, true);
  const std::string answer = "It is sunny in Paris.";
  ReasoningResult chat = p->Parse(answer, false);
  EXPECT_EQ(chat.reasoning_content, "");
  EXPECT_EQ(chat.content, answer);
  // DSML before `</think>` is still thinking (the reference's own parser rejects such output).
  const std::string early = "maybe" + call + "</think>ok";
  ReasoningResult inside = p->Parse(early, true);
  EXPECT_EQ(inside.reasoning_content, "maybe" + call);
  EXPECT_EQ(inside.content, "ok");
  ExpectStreamingAgrees(*p, early, true);
}

TEST(ReasoningParserTest, OutputThatOpensTheBlockItselfIsReasoningEvenWhenNotForced) {
  auto p = ReasoningParser::Create("deepseek-v4");
  const std::string text = "\n<think>plan the reply</think>Here it is.";
  ReasoningResult r = p->Parse(text, false);
  EXPECT_EQ(r.reasoning_content, "plan the reply");
  EXPECT_EQ(r.content, "Here it is.");
  ExpectStreamingAgrees(*p, text, false);
  // A `<think>` that is not at the start is text.
  const std::string later = "Use <think> tags.";
  EXPECT_EQ(p->Parse(later, false).content, later);
  ExpectStreamingAgrees(*p, later, false);
}

TEST(ReasoningParserTest, Qwen3ToolCallEndsThinking) {
  auto p = ReasoningParser::Create("qwen3");
  const std::string text =
      "<think>\nI should look up the weather.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, "\nI should look up the weather.\n");
  EXPECT_EQ(r.content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  ExpectStreamingAgrees(*p, text, true);
}

TEST(ReasoningParserTest, Glm45ThinkingThenAnswer) {
  auto p = ReasoningParser::Create("glm45");
  const std::string text = "<think>The user greets me.</think>\nHello! How can I help?";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, "The user greets me.");
  EXPECT_EQ(r.content, "\nHello! How can I help?");
  ExpectStreamingAgrees(*p, text, true);
  // enable_thinking false: no block at all.
  const std::string direct = "Hello! How can I help?";
  EXPECT_EQ(p->Parse(direct, false).content, direct);
  ExpectStreamingAgrees(*p, direct, false);
}

TEST(ReasoningParserTest, DeepSeekR1IgnoresToolTags) {
  auto p = ReasoningParser::Create("deepseek-r1");
  const std::string text = "thinking about <tool_call> tags</think>done";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, "thinking about <tool_call> tags");
  EXPECT_EQ(r.content, "done");
  ExpectStreamingAgrees(*p, text, true);
}

TEST(ReasoningParserTest, RepeatedOpeningTagsAndEmptyThinking) {
  auto p = ReasoningParser::Create("qwen3");
  const std::string text = "<think><think></think>Answer";
  ReasoningResult r = p->Parse(text, true);
  EXPECT_EQ(r.reasoning_content, "");
  EXPECT_EQ(r.content, "Answer");
  ExpectStreamingAgrees(*p, text, true);
  EXPECT_EQ(p->Parse("", true).reasoning_content, "");
  EXPECT_EQ(p->Parse("", false).content, "");
}

TEST(ReasoningParserTest, StreamingSendsReasoningBeforeTheEndTag) {
  auto p = ReasoningParser::Create("deepseek-r1");
  auto stream = p->NewStream(true);
  ReasoningDelta a = stream->Feed("Let me");
  EXPECT_EQ(a.reasoning, "Let me");
  ReasoningDelta b = stream->Feed(" see.</th");  // the partial tag is held back
  EXPECT_EQ(b.reasoning, " see.");
  ReasoningDelta c = stream->Feed("ink>42");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, "42");
}

TEST(ReasoningParserTest, StreamReasoningFalseHoldsReasoningUntilTheBlockCloses) {
  auto p = ReasoningParser::Create("deepseek-r1");
  auto stream = p->NewStream(true, /*stream_reasoning=*/false);
  EXPECT_EQ(stream->Feed("step one, ").reasoning, "");
  EXPECT_EQ(stream->Feed("step two").reasoning, "");
  ReasoningDelta d = stream->Feed("</think>ok");
  EXPECT_EQ(d.reasoning, "step one, step two");
  EXPECT_EQ(d.content, "ok");
  // Cut off before the end tag: Finish delivers the held reasoning.
  auto cut = p->NewStream(true, false);
  cut->Feed("never finished");
  EXPECT_EQ(cut->Finish().reasoning, "never finished");
}

TEST(ReasoningParserTest, ArbitraryBytesNeverBreakTheInvariant) {
  std::mt19937 rng(11);
  const std::vector<std::string> atoms = {"<think>", "</think>", "<tool_call>", "<", "/", "think", ">", "a", " ", "\n",
                                          "\xe4\xbd\xa0", "</", "<th"};
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    const int n = rng() % 12;
    for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    for (const std::string& name : ReasoningParser::Names()) {
      auto p = ReasoningParser::Create(name);
      for (bool forced : {true, false}) {
        ReasoningResult r = p->Parse(text, forced);
        // No text is invented: the outputs are made only of input bytes.
        EXPECT_LE(r.reasoning_content.size() + r.content.size(), text.size());
        ExpectStreamingAgrees(*p, text, forced);
      }
    }
  }
}

}  // namespace
}  // namespace fission::server
