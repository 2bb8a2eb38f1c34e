// Structured outputs end to end on the tool-trained demo model (tests/fixtures/models/demo-tools,
// --tool-call-parser qwen): every constrained answer parses and validates, streamed and whole
// answers agree, forced tool calls always parse with valid arguments, and bad constraints are
// 400s naming the problem. The 200-request run is in the slow tier (tests/server/slow/).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "server/json_schema_check_testlib.h"
#include "server/serve_process_testlib.h"
#include "server/structured_outputs_testlib.h"

namespace fission::server {
namespace {

using testing::PersonFailures;
using testing::PersonRequest;
using testing::PersonSchema;
using testing::PostAll;
using testing::SchemaViolation;

std::string ToolsModel() { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/demo-tools"; }

class StructuredOutputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess({"--model-path", ToolsModel(), "--tool-call-parser", "qwen", "--served-model-name", "tools"});
  }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port(); }
  static ServeProcess* server_;
};
ServeProcess* StructuredOutputs::server_ = nullptr;

const char* kQuestion = "Question: Mia has 12 stickers and gets 5 more. How many stickers does she have now?\nAnswer:";

TEST_F(StructuredOutputs, JsonSchemaAnswersParseAndValidate) {
  const std::vector<std::string> failures = PersonFailures(port(), 16, 1000);
  EXPECT_TRUE(failures.empty()) << failures.size() << " failures, the first: " << failures[0];
}

TEST_F(StructuredOutputs, StreamedAndWholeAnswersAgree) {
  for (std::uint64_t seed : {1, 2}) {
    const Reply whole = Post(port(), "/v1/chat/completions", PersonRequest(seed).dump());
    const Reply streamed = Post(port(), "/v1/chat/completions", PersonRequest(seed, true).dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    bool done = false;
    std::string text, finish;
    for (const Json& e : SseEvents(streamed.body, &done)) {
      if (e["choices"].empty()) continue;
      const Json& c = e["choices"][0];
      if (c["delta"].contains("content") && c["delta"]["content"].is_string()) text += c["delta"]["content"].get<std::string>();
      if (c["finish_reason"].is_string()) finish = c["finish_reason"].get<std::string>();
    }
    EXPECT_TRUE(done);
    EXPECT_EQ(text, whole.json["choices"][0]["message"]["content"].get<std::string>()) << "seed " << seed;
    EXPECT_EQ(finish, "stop");
    EXPECT_EQ(SchemaViolation(Json::parse(text), PersonSchema()), "");
  }
}

TEST_F(StructuredOutputs, SeveralCompletionsEachFollowTheSchema) {
  Json body = PersonRequest(9);
  body["n"] = 3;
  const Reply r = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["choices"].size(), 3u);
  for (const Json& c : r.json["choices"])
    EXPECT_EQ(SchemaViolation(Json::parse(c["message"]["content"].get<std::string>()), PersonSchema()), "");
}

TEST_F(StructuredOutputs, RegexEbnfAndJsonSchemaFieldsOfEveryRoute) {
  // /v1/completions with SGLang's `regex`.
  const Json regex = {{"prompt", kQuestion}, {"max_tokens", 40}, {"temperature", 0}, {"regex", " [A-Z][a-z]+ has [0-9]{1,3} stickers\\."}};
  const Reply a = Post(port(), "/v1/completions", regex.dump());
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_TRUE(std::regex_match(a.json["choices"][0]["text"].get<std::string>(), std::regex(" [A-Z][a-z]+ has [0-9]{1,3} stickers\\.")))
      << a.json["choices"][0]["text"];
  EXPECT_EQ(a.json["choices"][0]["finish_reason"], "stop");
  // /generate with an EBNF grammar in sampling_params.
  const Json ebnf = {{"text", kQuestion},
                     {"sampling_params", {{"max_new_tokens", 40}, {"temperature", 0},
                                          {"ebnf", "root ::= \" \" n \" + \" n \" = \" n\nn ::= [1-9] [0-9]?"}}}};
  const Reply b = Post(port(), "/generate", ebnf.dump());
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_TRUE(std::regex_match(b.json["text"].get<std::string>(), std::regex(" [1-9][0-9]? \\+ [1-9][0-9]? = [1-9][0-9]?")))
      << b.json["text"];
  // /generate and /v1/completions with `json_schema` as JSON text.
  const std::string schema = R"({"type": "object", "properties": {"answer": {"type": "integer", "minimum": 0, "maximum": 99}},
                                "required": ["answer"], "additionalProperties": false})";
  const Json native = {{"text", kQuestion}, {"sampling_params", {{"max_new_tokens", 60}, {"json_schema", schema}}}};
  const Reply c = Post(port(), "/generate", native.dump());
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(SchemaViolation(Json::parse(c.json["text"].get<std::string>()), Json::parse(schema)), "") << c.json["text"];
  const Json completion = {{"prompt", kQuestion}, {"max_tokens", 60}, {"seed", 4}, {"json_schema", schema}};
  const Reply d = Post(port(), "/v1/completions", completion.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(SchemaViolation(Json::parse(d.json["choices"][0]["text"].get<std::string>()), Json::parse(schema)), "");
}

TEST_F(StructuredOutputs, JsonObjectAnswersAreObjects) {
  // Any object: this model rambles inside strings, so only answers that finish are parsed.
  std::vector<Json> bodies;
  for (int i = 0; i < 4; ++i)
    bodies.push_back({{"messages", {{{"role", "user"}, {"content", "Reply with a JSON object."}}}}, {"max_tokens", 200},
                      {"temperature", 1.0}, {"seed", i}, {"response_format", {{"type", "json_object"}}}});
  int finished = 0;
  for (const Reply& r : PostAll(port(), "/v1/chat/completions", bodies)) {
    ASSERT_EQ(r.status, 200) << r.body;
    const Json& c = r.json["choices"][0];
    const std::string text = c["message"]["content"].get<std::string>();
    EXPECT_EQ(text.substr(0, 1), "{") << text;
    if (c["finish_reason"] != "stop") continue;
    ++finished;
    EXPECT_TRUE(Json::parse(text).is_object()) << text;
  }
  EXPECT_GT(finished, 0) << "no answer finished within max_tokens";
}

// The held-out tool-call conversations of tests/fixtures/demo/tool_calls.jsonl.
std::vector<Json> ToolCallRows(int count) {
  std::ifstream in(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo/tool_calls.jsonl");
  std::vector<Json> rows;
  std::string line;
  while (static_cast<int>(rows.size()) < count && std::getline(in, line)) {
    Json row = Json::parse(line);
    if (row["kind"] == "call") rows.push_back(std::move(row));
  }
  return rows;
}

// The arguments of every call validate against their tool's parameters.
void ExpectValidCalls(const Json& choice, const Json& tools, const std::string& only = "") {
  ASSERT_EQ(choice["finish_reason"], "tool_calls") << choice.dump();
  ASSERT_TRUE(choice["message"].contains("tool_calls")) << choice.dump();
  ASSERT_FALSE(choice["message"]["tool_calls"].empty());
  for (const Json& call : choice["message"]["tool_calls"]) {
    const std::string name = call["function"]["name"].get<std::string>();
    if (!only.empty()) {
      EXPECT_EQ(name, only);
    }
    Json schema;
    for (const Json& t : tools)
      if (t["function"]["name"] == name) schema = t["function"]["parameters"];
    ASSERT_FALSE(schema.is_null()) << "unknown tool " << name;
    EXPECT_EQ(SchemaViolation(Json::parse(call["function"]["arguments"].get<std::string>()), schema), "") << call.dump();
  }
}

TEST_F(StructuredOutputs, RequiredToolChoiceAlwaysGivesValidCalls) {
  std::vector<Json> bodies;
  const std::vector<Json> rows = ToolCallRows(4);
  for (const Json& row : rows) {
    // A plain question (no call asked for), sampled: the calls are forced all the same.
    Json messages = row["messages"];
    messages.back()["content"] = "Tell me a short story.";
    bodies.push_back({{"messages", messages}, {"tools", row["tools"]}, {"tool_choice", "required"},
                      {"max_tokens", 200}, {"temperature", 0.7}, {"seed", bodies.size()}});
  }
  const std::vector<Reply> replies = PostAll(port(), "/v1/chat/completions", bodies);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    ASSERT_EQ(replies[i].status, 200) << replies[i].body;
    ExpectValidCalls(replies[i].json["choices"][0], rows[i]["tools"]);
  }
}

TEST_F(StructuredOutputs, NamedToolChoiceCallsThatFunctionStreamedAndWhole) {
  const Json row = ToolCallRows(1)[0];
  Json body = {{"messages", row["messages"]}, {"tools", row["tools"]}, {"max_tokens", 200}, {"temperature", 0},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  const Reply whole = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(whole.status, 200) << whole.body;
  ExpectValidCalls(whole.json["choices"][0], row["tools"], "get_weather");
  EXPECT_EQ(whole.json["choices"][0]["message"]["tool_calls"].size(), 1u) << "a named function is called once";
  body["stream"] = true;
  const Reply streamed = Post(port(), "/v1/chat/completions", body.dump());
  std::string name, arguments;
  for (const Json& e : SseEvents(streamed.body))
    for (const Json& c : e["choices"])
      for (const Json& t : c["delta"].value("tool_calls", Json::array())) {
        name += t["function"].value("name", "");
        arguments += t["function"].value("arguments", "");
      }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, whole.json["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
}

TEST_F(StructuredOutputs, BadConstraintsAre400sNamingTheProblem) {
  const Json chat = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 5}};
  auto send = [&](Json extra) {
    Json body = chat;
    body.update(extra);
    return Post(port(), "/v1/chat/completions", body.dump());
  };
  struct Case {
    Json extra;
    const char* mention;
  };
  const std::vector<Case> cases = {
      {{{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema",
          {{"type", "object"}, {"properties", {{"tags", {{"type", "array"}, {"uniqueItems", true}}}}}}}}}}}},
       "unsupported JSON schema keyword 'uniqueItems' at #/properties/tags"},
      {{{"regex", "a(?=b)"}}, "'regex': regex: lookahead is not supported at offset 1"},
      {{{"ebnf", "root ::= x"}}, "'ebnf': ebnf: line 1 column 10: the rule 'x' is used but not defined"},
      {{{"regex", "a"}, {"ebnf", "root ::= \"a\""}}, "only one of regex, ebnf, json_schema and response_format"},
      {{{"response_format", {{"type", "xml"}}}}, "'response_format.type' must be text, json_object or json_schema"},
      {{{"tool_choice", "required"}}, "needs 'tools'"},
      {{{"tools", {{{"type", "function"}, {"function", {{"name", "add"}}}}}}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "mul"}}}}}},
       "names the function 'mul', which 'tools' does not offer"},
  };
  for (const Case& c : cases) {
    const Reply r = send(c.extra);
    EXPECT_EQ(r.status, 400) << c.extra.dump() << " -> " << r.body;
    EXPECT_NE(r.body.find(c.mention), std::string::npos) << c.extra.dump() << " -> " << r.body;
  }
}

TEST(StructuredOutputsFlags, GrammarBackendNoneRefusesAndOtherNamesServe) {
  const Json body = {{"prompt", "x"}, {"max_tokens", 3}, {"regex", "[ab]+"}};
  ServeProcess off({"--grammar-backend", "none"});
  const Reply refused = Post(off.port(), "/v1/completions", body.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(refused.body.find("--grammar-backend none"), std::string::npos) << refused.body;
  EXPECT_EQ(off.Stop(), 0);
  ServeProcess outlines({"--grammar-backend", "outlines"});
  const Reply served = Post(outlines.port(), "/v1/completions", body.dump());
  ASSERT_EQ(served.status, 200) << served.body;
  EXPECT_TRUE(std::regex_match(served.json["choices"][0]["text"].get<std::string>(), std::regex("[ab]+")));
  EXPECT_EQ(outlines.Stop(), 0);
}

TEST(StructuredOutputsFlags, ToolChoiceNeedsAParser) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 3}, {"tool_choice", "required"},
                     {"tools", {{{"type", "function"}, {"function", {{"name", "add"}}}}}}};
  ServeProcess none({});
  const Reply a = Post(none.port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(a.status, 400);
  EXPECT_NE(a.body.find("needs --tool-call-parser"), std::string::npos) << a.body;
  EXPECT_EQ(none.Stop(), 0);
}

// The formats that tag each argument, end to end: the demo model never saw their markup, yet a
// forced call comes back as a valid call of the named tool, whole and streamed alike.
TEST(StructuredOutputsFlags, TaggedFormatsForceValidCalls) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "measure", "parameters": {
      "type": "object", "properties": {"length": {"type": "integer", "minimum": 0, "maximum": 99},
      "unit": {"enum": ["cm", "m"]}}, "required": ["length", "unit"]}}}])");
  Json body = {{"messages", {{{"role", "user"}, {"content", "How long is the table?"}}}}, {"tools", tools},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "measure"}}}}}, {"max_tokens", 300},
               {"temperature", 0}};
  // (DSML's markup is long in a vocabulary that never saw it: one byte a token.)
  for (const char* parser : {"glm45", "deepseekv32"}) {
    SCOPED_TRACE(parser);
    ServeProcess server({"--model-path", ToolsModel(), "--tool-call-parser", parser});
    body.erase("stream");
    const Reply whole = Post(server.port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Json& choice = whole.json["choices"][0];
    ExpectValidCalls(choice, tools, "measure");
    EXPECT_EQ(choice["message"]["tool_calls"].size(), 1u) << choice.dump();
    body["stream"] = true;
    const Reply streamed = Post(server.port(), "/v1/chat/completions", body.dump());
    std::string arguments;
    for (const Json& e : SseEvents(streamed.body))
      for (const Json& c : e["choices"])
        for (const Json& t : c["delta"].value("tool_calls", Json::array()))
          arguments += t["function"].value("arguments", "");
    EXPECT_EQ(arguments, choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(server.Stop(), 0);
  }
}

// DeepSeek-V4 served end to end as its seed recipe serves it (TP 4 x CP 2, fp8 KV, page size
// 256, deepseek-v4 reasoning and deepseekv4 tool calls) on random weights: the chat request is
// rendered by V4's own encoding, and a forced single call comes back as a valid call of the tool
// (random weights would repeat calls until max_tokens if parallel calls were allowed).
TEST(StructuredOutputsFlags, DeepseekV4ForcesValidCallsThroughItsEncoding) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "measure", "parameters": {
      "type": "object", "properties": {"length": {"type": "integer", "minimum": 0, "maximum": 99}},
      "required": ["length"]}}}])");
  const Json body = {{"messages", {{{"role", "user"}, {"content", "How long is the table?"}}}}, {"tools", tools},
                     {"tool_choice", {{"type", "function"}, {"function", {{"name", "measure"}}}}},
                     {"parallel_tool_calls", false}, {"max_tokens", 300}, {"temperature", 0}};
  ServeProcess server({"--model-path", std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/recipes/models/deepseek_v4",
                       "--load-format", "dummy", "--json-model-override-args", R"({"vocab_size": 129280})",
                       "--tokenizer-path", DemoModelDir(), "--tp", "4", "--attn-cp-size", "2", "--kv-cache-dtype",
                       "fp8_e4m3", "--page-size", "256", "--reasoning-parser", "deepseek-v4", "--tool-call-parser",
                       "deepseekv4"});
  const Reply reply = Post(server.port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  ExpectValidCalls(reply.json["choices"][0], tools, "measure");
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
