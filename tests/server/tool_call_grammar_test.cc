// The forced tool-call grammars against their parsers: every output the grammar allows, built by
// random walks over a vocabulary of bytes and markup pieces, parses into complete, valid calls of
// the offered tools whose arguments follow their schemas.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_matcher.h"
#include "server/json_schema_check_testlib.h"
#include "server/tool_call_parser.h"

namespace fission::server {
namespace {

const char* kTools = R"([
  {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                 "b": {"type": "integer", "minimum": -9, "maximum": 9}}, "required": ["a", "b"]}},
  {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 7},
                                         "note": {"type": "string", "maxLength": 4}}, "required": ["city"]}}])";
// And one without declared properties: in the tagged formats any keys with text values.
const char* kToolsWithAnyArguments = R"([
  {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                 "b": {"type": "integer", "minimum": -9, "maximum": 9}}, "required": ["a", "b"]}},
  {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}}}},
  {"name": "log", "parameters": {}}])";

std::shared_ptr<const grammar::Vocabulary> Pieces() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"<tool_call>", "</tool_call>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                        "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>", "function", "```json\n", "\n```",
                        "{\"name\": \"", "\", \"arguments\": ", "Paris", "Oslo", "get_weather", "add", "\": ", ", \"",
                        "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<｜DSML｜function_calls>",
                        "</｜DSML｜function_calls>", "<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>",
                        "<｜DSML｜invoke name=\"", "</｜DSML｜invoke>", "<｜DSML｜parameter name=\"", "\" string=\"",
                        "</｜DSML｜parameter>", "true\">", "false\">", "log"})
    tokens.push_back(t);
  return std::make_shared<const grammar::Vocabulary>(std::move(tokens));
}

// A random sentence of the grammar: a random allowed token each step, stopping once complete
// with probability 1/2 (or when nothing may follow).
std::string RandomOutput(const std::shared_ptr<const grammar::CompiledGrammar>& g, std::mt19937& rng) {
  grammar::GrammarMatcher m(g);
  std::string text;
  std::vector<std::uint32_t> mask(grammar::MaskWords(g->vocabulary().size()));
  for (int step = 0; step < 2000; ++step) {
    if (m.IsTerminated() || (m.IsComplete() && rng() % 2 == 0)) break;
    m.FillNextTokenMask(mask);
    std::vector<std::int32_t> allowed;
    for (std::int32_t id = 0; id < g->vocabulary().size(); ++id)
      if ((mask[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
    if (allowed.empty()) break;
    // Inside free text (most tokens allowed) markup pieces half the time, and whitespace rarely, so
    // walks reach the end.
    std::vector<std::int32_t> pieces;
    if (allowed.size() > 128)
      for (std::int32_t id : allowed)
        if (g->vocabulary().bytes(id).size() > 1) pieces.push_back(id);
    std::int32_t pick = !pieces.empty() && rng() % 2 == 0 ? pieces[rng() % pieces.size()] : allowed[rng() % allowed.size()];
    // (Not where a separator newline is one of a few choices: there it is taken as often as the rest.)
    for (int tries = 0; allowed.size() > 4 && tries < 4 &&
                        std::isspace(static_cast<unsigned char>(g->vocabulary().bytes(pick)[0]));
         ++tries)
      pick = allowed[rng() % allowed.size()];
    EXPECT_TRUE(m.AcceptToken(pick));
    text += g->vocabulary().bytes(pick);
  }
  EXPECT_TRUE(m.IsComplete()) << text;
  return text;
}

void CheckParser(const std::string& parser, bool parallel, const Json& name, const char* tools_text = kTools) {
  const OrderedJson tools = OrderedJson::parse(tools_text);
  const OrderedJson description = {{"parser", parser}, {"tools", tools}, {"name", name}, {"parallel", parallel}};
  const auto g = std::make_shared<const grammar::CompiledGrammar>(ToolCallGrammar(description), Pieces());
  const auto specs = ToolSpecsFromJson(Json::parse(R"([{"type": "function", "function": {"name": "add"}},
                                                       {"type": "function", "function": {"name": "get_weather"}},
                                                       {"type": "function", "function": {"name": "log"}}])"));
  const bool tagged = parser.rfind("glm", 0) == 0 || parser == "deepseekv32" || parser == "deepseekv4";
  const auto p = ToolCallParser::Create(parser);
  const Json schemas = Json::parse(tools_text);
  std::mt19937 rng(11);
  std::size_t several = 0;
  for (int walk = 0; walk < 40; ++walk) {
    const std::string text = RandomOutput(g, rng);
    const ToolCallResult r = p->Parse(text, specs, 1);
    EXPECT_EQ(r.content, "") << parser << ": " << text;
    ASSERT_FALSE(r.tool_calls.empty()) << parser << ": " << text;
    if (!parallel) {
      EXPECT_EQ(r.tool_calls.size(), 1u) << text;
    }
    several += r.tool_calls.size() > 1;
    for (const ToolCall& call : r.tool_calls) {
      EXPECT_TRUE(call.complete && call.valid) << parser << ": " << text;
      if (!name.is_null()) {
        EXPECT_EQ(call.name, name.get<std::string>());
      }
      const Json& schema = schemas[call.name == "add" ? 0 : call.name == "get_weather" ? 1 : 2]["parameters"];
      Json arguments = Json::parse(call.arguments);
      // The tagged formats do not enforce string keywords (maxLength here): the free text is checked
      // for its type alone.
      if (tagged && arguments.contains("note")) arguments["note"] = "";
      EXPECT_EQ(testing::SchemaViolation(arguments, schema), "") << parser << ": " << text;
    }
  }
  if (parallel) {
    EXPECT_GT(several, 0u) << parser << ": some walks make several calls";
  }
}

TEST(ToolCallGrammar, QwenOutputsParseIntoValidCalls) {
  CheckParser("qwen", true, nullptr);
  CheckParser("qwen", false, "get_weather");
}

TEST(ToolCallGrammar, DeepSeekOutputsParseIntoValidCalls) {
  for (const char* parser : {"deepseekv3", "deepseekv31"}) {
    CheckParser(parser, true, nullptr);
    CheckParser(parser, false, "add");
  }
}

TEST(ToolCallGrammar, TaggedValueOutputsParseIntoValidCalls) {
  for (const char* parser : {"glm45", "glm47", "deepseekv32", "deepseekv4"}) {
    CheckParser(parser, true, nullptr);
    CheckParser(parser, false, "get_weather");
    CheckParser(parser, false, "log", kToolsWithAnyArguments);
    CheckParser(parser, true, nullptr, kToolsWithAnyArguments);
  }
}

TEST(ToolCallGrammar, EveryParserCanBeForced) {
  for (const std::string& parser : ToolCallParser::Names()) EXPECT_TRUE(ToolCallGrammarSupports(parser)) << parser;
  EXPECT_FALSE(ToolCallGrammarSupports("llama3"));
}

}  // namespace
}  // namespace fission::server
