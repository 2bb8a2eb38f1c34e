#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "base/error.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/deepseek_v4_encoding.h"

namespace fission::server {
namespace {

constexpr std::uint64_t kSeed = 1234;

std::vector<ToolSpec> WeatherTools() {
  return ToolSpecsFromJson(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
      "coords": {"type": "object"}, "tags": {"type": "array", "items": {"type": "string"}},
      "zip": {"type": "string"}, "ratio": {"anyOf": [{"type": "number"}, {"type": "null"}]}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {
      "zone": {"type": "string"}}}}}
  ])"));
}

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

// Streams `pieces` and rebuilds the result from the deltas alone, checking the delta protocol:
// a call's first delta has id and name, later ones only argument text, indices in order.
ToolCallResult StreamPieces(const ToolCallParser& parser, const std::vector<std::string>& pieces,
                            const std::vector<ToolSpec>& tools) {
  auto stream = parser.NewStream(tools, kSeed);
  ToolCallResult r;
  auto take = [&](const ToolCallChunk& chunk) {
    r.content += chunk.content;
    for (const ToolCallDelta& d : chunk.tool_calls) {
      if (!d.id.empty()) {
        EXPECT_EQ(d.index, static_cast<int>(r.tool_calls.size()));
        EXPECT_FALSE(d.name.empty());
        EXPECT_EQ(d.arguments, "");
        ToolCall call;
        call.index = d.index;
        call.id = d.id;
        call.name = d.name;
        r.tool_calls.push_back(call);
      } else {
        EXPECT_TRUE(d.name.empty());
        EXPECT_FALSE(d.arguments.empty());
        EXPECT_EQ(d.index + 1, static_cast<int>(r.tool_calls.size())) << "arguments for a call already closed";
        r.tool_calls.at(d.index).arguments += d.arguments;
      }
    }
  };
  for (const std::string& p : pieces) take(stream->Feed(p));
  take(stream->Finish());
  // The stream's own record agrees with what its deltas said.
  EXPECT_EQ(stream->calls().size(), r.tool_calls.size());
  for (std::size_t i = 0; i < r.tool_calls.size() && i < stream->calls().size(); ++i) {
    EXPECT_EQ(stream->calls()[i].arguments, r.tool_calls[i].arguments);
    r.tool_calls[i].complete = stream->calls()[i].complete;
    r.tool_calls[i].valid = stream->calls()[i].valid;
  }
  return r;
}

void ExpectSame(const ToolCallResult& a, const ToolCallResult& b, const std::string& where) {
  ASSERT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << where;
  for (std::size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].id, b.tool_calls[i].id) << where;
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << where;
    ASSERT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << where;
    EXPECT_EQ(a.tool_calls[i].complete, b.tool_calls[i].complete) << where;
    EXPECT_EQ(a.tool_calls[i].valid, b.tool_calls[i].valid) << where;
  }
}

void ExpectStreamingAgrees(const ToolCallParser& parser, const std::string& text, const std::vector<ToolSpec>& tools) {
  const ToolCallResult whole = parser.Parse(text, tools, kSeed);
  for (std::size_t cut = 0; cut <= text.size(); ++cut)
    ExpectSame(StreamPieces(parser, Cut(text, {cut}), tools), whole, StrCat(parser.name(), " cut at ", cut));
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < text.size(); ++i) every.push_back(i);
  ExpectSame(StreamPieces(parser, Cut(text, every), tools), whole, parser.name() + " byte by byte");
  std::mt19937 rng(3);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::size_t> cuts;
    for (std::size_t i = 1; i < text.size(); ++i)
      if (rng() % 5 == 0) cuts.push_back(i);
    ExpectSame(StreamPieces(parser, Cut(text, cuts), tools), whole, StrCat(parser.name(), " random trial ", trial, " text: ", text));
  }
}

// Parses, checks streaming agrees, returns the whole-text result.
ToolCallResult ParseChecked(const std::string& parser_name, const std::string& text,
                            const std::vector<ToolSpec>& tools = WeatherTools()) {
  auto parser = ToolCallParser::Create(parser_name);
  ExpectStreamingAgrees(*parser, text, tools);
  return parser->Parse(text, tools, kSeed);
}

Json Args(const ToolCall& call) { return Json::parse(call.arguments); }

TEST(ToolCallParserTest, FactoryKnowsEveryNameAndRejectsOthers) {
  for (const std::string& name : ToolCallParser::Names()) EXPECT_EQ(ToolCallParser::Create(name)->name(), name);
  try {
    ToolCallParser::Create("hermes2");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("hermes2"), std::string::npos);
    for (const std::string& name : ToolCallParser::Names()) EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

TEST(ToolCallParserTest, IdsAreDeterministicPerSeedAndWellFormed) {
  ToolCallIds a(5), b(5), c(6);
  const std::string first = a.Next();
  EXPECT_EQ(first, b.Next());
  EXPECT_NE(first, c.Next());
  EXPECT_NE(first, a.Next());
  ASSERT_EQ(first.size(), 5u + 24u);
  EXPECT_EQ(first.substr(0, 5), "call_");
  for (char ch : first.substr(5)) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(ch))) << first;
}

TEST(ToolCallParserTest, ToolSpecsFromJsonNamesTheBadEntry) {
  EXPECT_TRUE(ToolSpecsFromJson(Json()).empty());
  EXPECT_EQ(WeatherTools().size(), 2u);
  for (const char* bad : {R"({"a": 1})", R"([{"type": "function"}])", R"([1])",
                          R"([{"type": "function", "function": {"name": "f"}}, {"function": {"name": ""}}])",
                          R"([{"type": "function", "function": {"name": "f", "parameters": 3}}])"}) {
    EXPECT_THROW(ToolSpecsFromJson(Json::parse(bad)), Error) << bad;
  }
  try {
    ToolSpecsFromJson(Json::parse(R"([{"type": "function", "function": {"name": "f"}}, {"function": {}}])"));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tools[1]"), std::string::npos) << e.what();
  }
}

TEST(ToolCallParserTest, DeepSeekV3TwoCallsWithTextBefore) {
  const std::string text =
      "Let me check both cities.\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
      "```json\n{\"city\": \"Tokyo\", \"days\": 3}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
      "get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ToolCallResult r = ParseChecked("deepseekv3", text);
  EXPECT_EQ(r.content, "Let me check both cities.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\": \"Tokyo\", \"days\": 3}");
  EXPECT_EQ(r.tool_calls[1].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(r.tool_calls[0].index, 0);
  EXPECT_EQ(r.tool_calls[1].index, 1);
  EXPECT_NE(r.tool_calls[0].id, r.tool_calls[1].id);
  EXPECT_TRUE(r.tool_calls[0].valid && r.tool_calls[1].valid && r.tool_calls[1].complete);
}

TEST(ToolCallParserTest, DeepSeekV3ArgumentsStreamBeforeTheCallEnds) {
  auto parser = ToolCallParser::Create("deepseekv3");
  auto stream = parser->NewStream(WeatherTools(), kSeed);
  ToolCallChunk a = stream->Feed("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"ci");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[1].arguments, "{\"ci");
  ToolCallChunk b = stream->Feed("ty\": \"Oslo\"}\n``");
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_EQ(b.tool_calls[0].arguments, "ty\": \"Oslo\"}");
  stream->Feed("`<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  stream->Finish();
  EXPECT_EQ(stream->calls().at(0).arguments, "{\"city\": \"Oslo\"}");
}

TEST(ToolCallParserTest, DeepSeekV31WithTextAfter) {
  const std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"zone\": \"UTC\"}<｜tool▁call▁end｜>"
      "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Rome\", \"metric\": true}<｜tool▁call▁end｜>"
      "<｜tool▁calls▁end｜>\nDone.";
  ToolCallResult r = ParseChecked("deepseekv31", text);
  EXPECT_EQ(r.content, "Done.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_time");
  EXPECT_EQ(Args(r.tool_calls[0]), Json::parse(R"({"zone": "UTC"})"));
  EXPECT_EQ(Args(r.tool_calls[1]), Json::parse(R"({"city": "Rome", "metric": true})"));
}

TEST(ToolCallParserTest, DeepSeekUnknownFunctionIsDroppedAndTextKept) {
  const std::string text =
      "Hi <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>launch_rocket<｜tool▁sep｜>{\"now\": true}<｜tool▁call▁end｜>"
      "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ToolCallResult r = ParseChecked("deepseekv31", text);
  EXPECT_EQ(r.content, "Hi");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].name, "get_time");
  EXPECT_EQ(r.tool_calls[0].index, 0);
  // Without a tool list every name is accepted.
  ToolCallResult any = ParseChecked("deepseekv31", text, {});
  ASSERT_EQ(any.tool_calls.size(), 2u);
  EXPECT_EQ(any.tool_calls[0].name, "launch_rocket");
}

TEST(ToolCallParserTest, DeepSeekInvalidJsonAndTruncationAreReportedNotHidden) {
  ToolCallResult bad = ParseChecked(
      "deepseekv31", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{zone: UTC}<｜tool▁call▁end｜>");
  ASSERT_EQ(bad.tool_calls.size(), 1u);
  EXPECT_EQ(bad.tool_calls[0].arguments, "{zone: UTC}");
  EXPECT_TRUE(bad.tool_calls[0].complete);
  EXPECT_FALSE(bad.tool_calls[0].valid);
  ToolCallResult cut = ParseChecked(
      "deepseekv3", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Lim");
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, "{\"city\": \"Lim");
  EXPECT_FALSE(cut.tool_calls[0].complete);
  EXPECT_FALSE(cut.tool_calls[0].valid);
  // A head that never names a function is text.
  ToolCallResult head = ParseChecked("deepseekv31", "<｜tool▁call▁begin｜><｜tool▁call▁end｜> ok");
  EXPECT_TRUE(head.tool_calls.empty());
  EXPECT_EQ(head.content, "<｜tool▁call▁begin｜><｜tool▁call▁end｜> ok");
}

TEST(ToolCallParserTest, DeepSeekV4ParametersConvertByStringFlag) {
  const std::string text =
      "I'll look that up.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">San Francisco</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">5</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"coords\" string=\"false\">{\"lat\": 37.7, \"lon\": -122.4}</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"zip\" string=\"true\">02134</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n{\"zone\": \"PST\"}\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>";
  ToolCallResult r = ParseChecked("deepseekv4", text);
  EXPECT_EQ(r.content, "I'll look that up.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments,
            R"({"city":"San Francisco","days":5,"coords":{"lat":37.7,"lon":-122.4},"zip":"02134"})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"zone":"PST"})");
  EXPECT_TRUE(r.tool_calls[0].valid && r.tool_calls[1].valid);
}

TEST(ToolCallParserTest, DeepSeekV4NoParametersAndTruncation) {
  ToolCallResult r = ParseChecked(
      "deepseekv4", "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{}");
  ToolCallResult cut = ParseChecked(
      "deepseekv4",
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Par");
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, "");
  EXPECT_FALSE(cut.tool_calls[0].complete);
  // An invoke tag without a name is text.
  ToolCallResult bad = ParseChecked("deepseekv4", "<｜DSML｜tool_calls><｜DSML｜invoke id=\"x\">");
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_NE(bad.content.find("invoke"), std::string::npos);
}

// DeepSeek-V3.2 writes the V4 DSML inside <｜DSML｜function_calls>, after "\n\n" (its encoder's layout).
TEST(ToolCallParserTest, DeepSeekV32ParametersConvertByStringFlag) {
  const std::string text =
      "Let me check.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">東京</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"metric\" string=\"false\">true</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"ratio\" string=\"false\">null</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"tags\" string=\"false\">[\"rain\", \"wind\"]</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"coords\" string=\"false\">{\"lat\": 35.68, \"lon\": 139.7}</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"zip\" string=\"true\">100-0001</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_time\">\n"
      "<｜DSML｜parameter name=\"zone\" string=\"true\">Asia/Tokyo</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜function_calls>";
  ToolCallResult r = ParseChecked("deepseekv32", text);
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.tool_calls[0].arguments,
            R"({"city":"東京","days":3,"metric":true,"ratio":null,"tags":["rain","wind"],)"
            R"("coords":{"lat":35.68,"lon":139.7},"zip":"100-0001"})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"zone":"Asia/Tokyo"})");
  EXPECT_TRUE(r.tool_calls[0].valid && r.tool_calls[1].valid && r.tool_calls[1].complete);
  EXPECT_TRUE(ToolCallParser::Create("deepseekv32")->HasToolCall(text));
}

TEST(ToolCallParserTest, DeepSeekV32JsonBodyNoParametersTruncationAndUnknownNames) {
  ToolCallResult r = ParseChecked(
      "deepseekv32",
      "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"get_weather\">\n{\"city\": \"Oslo\"}\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"launch\">\n<｜DSML｜parameter name=\"now\" string=\"false\">1</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜function_calls>\nDone.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, "{}");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"city":"Oslo"})");
  EXPECT_EQ(r.tool_calls[1].index, 1);
  EXPECT_EQ(r.content, "Done.");
  ToolCallResult cut = ParseChecked(
      "deepseekv32", "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                     "<｜DSML｜parameter name=\"city\" string=\"true\">Par");
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, "");
  EXPECT_FALSE(cut.tool_calls[0].complete);
  ToolCallResult bad = ParseChecked("deepseekv32", "<｜DSML｜function_calls><｜DSML｜invoke id=\"x\">");
  EXPECT_TRUE(bad.tool_calls.empty());
  EXPECT_NE(bad.content.find("invoke"), std::string::npos);
}

// Each DSML parser reads its own block only: V4's <｜DSML｜tool_calls> is text to the V3.2 parser.
TEST(ToolCallParserTest, DsmlBlockNamesAreNotMixed) {
  const std::string v4 = "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_time\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const std::string v32 =
      "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_time\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>";
  EXPECT_EQ(ParseChecked("deepseekv32", v4).content, v4);
  EXPECT_EQ(ParseChecked("deepseekv4", v32).content, v32);
  EXPECT_EQ(ParseChecked("deepseekv32", v32).tool_calls.size(), 1u);
  EXPECT_FALSE(ToolCallParser::Create("deepseekv32")->HasToolCall(v4));
}

// What a DeepSeek encoder (V3.2's, V4's) writes for an assistant's tool calls parses back, with
// `parser`, to the same arguments.
void ExpectParserReadsWhatTheEncoderWrites(const std::string& parser,
                                           const std::function<std::string(const OrderedJson&)>& encode) {
  const OrderedJson arguments = OrderedJson::parse(
      R"({"city": "Zürich", "days": 2, "ratio": 0.25, "metric": false, "tags": ["a"], "coords": {"lat": 47.4}})");
  OrderedJson messages = OrderedJson::array();
  messages.push_back({{"role", "user"}, {"content", "Q"}});
  OrderedJson call = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", arguments.dump()}}}};
  messages.push_back({{"role", "assistant"}, {"content", "Checking."}, {"tool_calls", OrderedJson::array({call})}});
  std::string text = encode(messages);
  // The model's output is the assistant turn: after the user turn's "</think>", without the EOS.
  text = text.substr(text.find("</think>") + 8);
  text.resize(text.rfind("<｜end▁of▁sentence｜>"));
  ToolCallResult r = ParseChecked(parser, text);
  EXPECT_EQ(r.content, "Checking.");
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(OrderedJson::parse(r.tool_calls[0].arguments), arguments);
}

TEST(ToolCallParserTest, DeepSeekV32ReadsWhatItsEncoderWrites) {
  ExpectParserReadsWhatTheEncoderWrites("deepseekv32",
                                        [](const OrderedJson& m) { return tokenizer::EncodeDeepSeekV32(m, {}); });
}

TEST(ToolCallParserTest, DeepSeekV4ReadsWhatItsEncoderWrites) {
  ExpectParserReadsWhatTheEncoderWrites("deepseekv4",
                                        [](const OrderedJson& m) { return tokenizer::EncodeDeepSeekV4(m, {}); });
}

TEST(ToolCallParserTest, Glm45KeyValueMarkupUsesTheSchema) {
  const std::string text =
      "Checking the forecast.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>北京</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n<arg_key>metric</arg_key>\n<arg_value>true</arg_value>\n"
      "<arg_key>zip</arg_key>\n<arg_value>100000</arg_value>\n<arg_key>tags</arg_key>\n"
      "<arg_value>[\"rain\", \"wind\"]</arg_value>\n<arg_key>extra</arg_key>\n<arg_value>12.5</arg_value>\n"
      "</tool_call>\n<tool_call>get_time\n<arg_key>zone</arg_key>\n<arg_value>Asia/Shanghai</arg_value>\n"
      "</tool_call>";
  ToolCallResult r = ParseChecked("glm45", text);
  EXPECT_EQ(r.content, "Checking the forecast.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  // zip is a string in the schema, so its digits stay a string; `extra` has no schema and parses.
  EXPECT_EQ(r.tool_calls[0].arguments,
            R"({"city":"北京","days":3,"metric":true,"zip":"100000","tags":["rain","wind"],"extra":12.5})");
  EXPECT_EQ(Args(r.tool_calls[1]), Json::parse(R"({"zone": "Asia/Shanghai"})"));
}

TEST(ToolCallParserTest, Glm47CompactMarkupAndNoArguments) {
  const std::string text =
      "<tool_call>get_weather<arg_key>city</arg_key><arg_value>上海</arg_value><arg_key>days</arg_key>"
      "<arg_value>2</arg_value></tool_call><tool_call>get_time</tool_call>After.";
  ToolCallResult r = ParseChecked("glm47", text);
  EXPECT_EQ(r.content, "After.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city":"上海","days":2})");
  EXPECT_EQ(r.tool_calls[1].arguments, "{}");
}

TEST(ToolCallParserTest, GlmValuesThatDoNotFitTheSchemaStayStrings) {
  const std::string text =
      "<tool_call>get_weather<arg_key>days</arg_key><arg_value>three</arg_value><arg_key>metric</arg_key>"
      "<arg_value>True</arg_value><arg_key>ratio</arg_key><arg_value>0.5</arg_value><arg_key>coords</arg_key>"
      "<arg_value>{broken</arg_value></tool_call>";
  ToolCallResult r = ParseChecked("glm47", text);
  ASSERT_EQ(r.tool_calls.size(), 1u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"days":"three","metric":true,"ratio":0.5,"coords":"{broken"})");
}

TEST(ToolCallParserTest, GlmStreamsOneParameterAtATime) {
  auto parser = ToolCallParser::Create("glm45");
  auto stream = parser->NewStream(WeatherTools(), kSeed);
  ToolCallChunk a = stream->Feed("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_k");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[1].arguments, R"({"city":"Oslo")");
  ToolCallChunk b = stream->Feed("ey>days</arg_key><arg_value>4</arg_value></tool_call>");
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_EQ(b.tool_calls[0].arguments, R"(,"days":4})");
}

TEST(ToolCallParserTest, GlmTruncatedAndMalformed) {
  ToolCallResult cut = ParseChecked("glm45", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Par");
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_FALSE(cut.tool_calls[0].complete);
  ToolCallResult unnamed = ParseChecked("glm45", "<tool_call><arg_key>a</arg_key></tool_call>");
  EXPECT_TRUE(unnamed.tool_calls.empty());
  EXPECT_NE(unnamed.content.find("<tool_call>"), std::string::npos);
  ToolCallResult unknown = ParseChecked("glm47", "<tool_call>rm_rf<arg_key>p</arg_key><arg_value>/</arg_value></tool_call>ok");
  EXPECT_TRUE(unknown.tool_calls.empty());
  EXPECT_EQ(unknown.content, "ok");
}

TEST(ToolCallParserTest, QwenHermesCalls) {
  const std::string text =
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Berlin\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"C}E{T\\\"\"}}\n</tool_call>";
  ToolCallResult r = ParseChecked("qwen", text);
  EXPECT_EQ(r.content, "Sure.");
  ASSERT_EQ(r.tool_calls.size(), 2u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"city": "Berlin", "days": 2})");
  EXPECT_EQ(r.tool_calls[1].name, "get_time");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"zone": "C}E{T\""})");  // braces in strings do not count
  EXPECT_TRUE(r.tool_calls[0].valid && r.tool_calls[1].valid);
}

TEST(ToolCallParserTest, QwenArgumentsStreamAsWritten) {
  auto parser = ToolCallParser::Create("qwen");
  auto stream = parser->NewStream(WeatherTools(), kSeed);
  ToolCallChunk a = stream->Feed("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Li");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[1].arguments, "{\"city\": \"Li");
  ToolCallChunk b = stream->Feed("ma\", \"tags\": [\"x\"]}}\n</tool_call>");
  ASSERT_EQ(b.tool_calls.size(), 1u);
  EXPECT_EQ(b.tool_calls[0].arguments, "ma\", \"tags\": [\"x\"]}");
  stream->Finish();
  EXPECT_TRUE(stream->calls().at(0).valid);
}

TEST(ToolCallParserTest, QwenOtherLayoutsAreReadWhole) {
  // Arguments before the name, and arguments given as a JSON string.
  ToolCallResult r = ParseChecked(
      "qwen", "<tool_call>{\"arguments\": {\"zone\": \"X\"}, \"name\": \"get_time\"}</tool_call>"
              "<tool_call>{\"name\": \"get_time\", \"arguments\": \"{\\\"zone\\\": 1}\"}</tool_call>"
              "<tool_call>{\"name\": \"get_time\"}</tool_call>");
  ASSERT_EQ(r.tool_calls.size(), 3u);
  EXPECT_EQ(r.tool_calls[0].arguments, R"({"zone":"X"})");
  EXPECT_EQ(r.tool_calls[1].arguments, R"({"zone": 1})");
  EXPECT_EQ(r.tool_calls[2].arguments, "{}");
  ToolCallResult params = ParseChecked("qwen", "<tool_call>{\"name\": \"get_time\", \"parameters\": {\"zone\": \"X\"}}</tool_call>");
  ASSERT_EQ(params.tool_calls.size(), 1u);
  EXPECT_EQ(params.tool_calls[0].arguments, R"({"zone": "X"})");
}

TEST(ToolCallParserTest, QwenMalformedCalls) {
  // Invalid arguments after a well-formed head: the call is reported, marked invalid.
  ToolCallResult bad = ParseChecked("qwen", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {zone}}\n</tool_call>");
  ASSERT_EQ(bad.tool_calls.size(), 1u);
  EXPECT_EQ(bad.tool_calls[0].arguments, "{zone}");
  EXPECT_FALSE(bad.tool_calls[0].valid);
  // Arguments cut by the closing tag.
  ToolCallResult cut = ParseChecked("qwen", "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": 1</tool_call>x");
  ASSERT_EQ(cut.tool_calls.size(), 1u);
  EXPECT_EQ(cut.tool_calls[0].arguments, "{\"zone\": 1");
  EXPECT_FALSE(cut.tool_calls[0].valid);
  EXPECT_EQ(cut.content, "x");
  // JSON that is not a call stays text, tags included.
  const std::string list = "<tool_call>[1, 2]</tool_call>";
  ToolCallResult l = ParseChecked("qwen", list);
  EXPECT_TRUE(l.tool_calls.empty());
  EXPECT_EQ(l.content, list);
  // Never closed, and not yet a call: text.
  ToolCallResult o = ParseChecked("qwen", "Text <tool_call>{\"name\": \"get_time\"");
  EXPECT_TRUE(o.tool_calls.empty());
  EXPECT_EQ(o.content, "Text<tool_call>{\"name\": \"get_time\"");
  // Cut inside the arguments: an incomplete call.
  ToolCallResult t = ParseChecked("qwen", "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zo");
  ASSERT_EQ(t.tool_calls.size(), 1u);
  EXPECT_FALSE(t.tool_calls[0].complete);
  // An unknown function is dropped.
  ToolCallResult u = ParseChecked("qwen", "<tool_call>{\"name\": \"nope\", \"arguments\": {}}</tool_call> after");
  EXPECT_TRUE(u.tool_calls.empty());
  EXPECT_EQ(u.content, "after");
}

TEST(ToolCallParserTest, TextWithoutCallsPassesThroughUntouched) {
  const std::string text = "Plain answer with <tags>, a < sign,\n\n and trailing space  ";
  for (const std::string& name : ToolCallParser::Names()) {
    ToolCallResult r = ParseChecked(name, text);
    EXPECT_EQ(r.content, text) << name;
    EXPECT_TRUE(r.tool_calls.empty()) << name;
    EXPECT_FALSE(ToolCallParser::Create(name)->HasToolCall(text));
  }
}

TEST(ToolCallParserTest, RandomMarkupSoupKeepsStreamingEqualToParse) {
  std::mt19937 rng(21);
  const std::vector<std::string> atoms = {
      "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "get_time", "{",
      "}", "\"", ":", "\n", " ", "x", "<", "\\n", "{\"name\": \"get_time\", \"arguments\": {}}",
      "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>",
      "```json\n", "\n```", "function", "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>", "<｜DSML｜invoke name=\"get_time\">",
      "</｜DSML｜invoke>", "<｜DSML｜parameter name=\"zone\" string=\"false\">", "</｜DSML｜parameter>", "\xff",
      "<｜DSML｜function_calls>", "</｜DSML｜function_calls>", "\n\n"};
  for (int trial = 0; trial < 120; ++trial) {
    std::string text;
    const int n = 1 + rng() % 14;
    for (int i = 0; i < n; ++i) text += atoms[rng() % atoms.size()];
    for (const std::string& name : ToolCallParser::Names()) {
      auto parser = ToolCallParser::Create(name);
      ExpectStreamingAgrees(*parser, text, WeatherTools());
      ExpectStreamingAgrees(*parser, text, {});
    }
  }
}

}  // namespace
}  // namespace fission::server
