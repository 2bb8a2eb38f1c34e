// The generation routes' decoding (request_decoding.h) on the demo model's tokenizer: every bad
// body is an ApiError with a 4xx status naming what is wrong, never another exception.
#include "server/request_decoding.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/deepseek_v32_encoding.h"
#include "tokenizer/deepseek_v4_encoding.h"

namespace fission::server {
namespace {

class RequestDecodingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = tokenizer::Tokenizer::Load(std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3").release();
    chat_template_ = new tokenizer::ChatTemplate(tokenizer::ChatTemplate::ForModel(tokenizer_->config(), std::nullopt));
  }
  RouteContext Context() const {
    RouteContext c;
    c.tokenizer = tokenizer_;
    c.chat_template = chat_template_;
    c.served_model_name = "demo";
    c.model_path = "/models/demo";
    c.context_length = 2048;
    c.vocab_size = tokenizer_->vocab_size();
    c.kv_capacity_tokens = 16384;
    c.max_prompt_bytes = MaxPromptBytes(*tokenizer_, c.context_length);
    return c;
  }
  // The status and message a body decodes to on `route` (0 when it decodes).
  std::pair<int, std::string> Decode(const std::string& route, const std::string& body) const {
    try {
      if (route == "completions") DecodeCompletion(body, Context());
      if (route == "chat") DecodeChat(body, Context());
      if (route == "generate") DecodeGenerate(body, Context());
    } catch (const ApiError& e) {
      return {e.status(), e.what()};
    }
    return {0, ""};
  }
  static tokenizer::Tokenizer* tokenizer_;
  static tokenizer::ChatTemplate* chat_template_;
};
tokenizer::Tokenizer* RequestDecodingTest::tokenizer_ = nullptr;
tokenizer::ChatTemplate* RequestDecodingTest::chat_template_ = nullptr;

TEST_F(RequestDecodingTest, GoodRequestsDecode) {
  const DecodedCompletion c = DecodeCompletion(R"({"prompt": ["a", [1, 2]], "max_tokens": 3, "model": "demo"})", Context());
  ASSERT_EQ(c.prompts.size(), 2u);
  EXPECT_EQ(c.prompts[1], (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(c.model, "demo");
  const DecodedChat chat = DecodeChat(R"({"messages": [{"role": "user", "content": "Hi"}]})", Context());
  EXPECT_FALSE(chat.prompt.empty());
  EXPECT_EQ(chat.request.params.max_new_tokens, 2048 - static_cast<int>(chat.prompt.size()));
  const DecodedGenerate g = DecodeGenerate(R"({"input_ids": [[1, 2], [3]], "sampling_params": {"max_new_tokens": 2}})", Context());
  EXPECT_TRUE(g.request.batch);
  EXPECT_EQ(g.prompts.size(), 2u);
}

// SGLang's policy: any model name is served and answered under the name the client sent.
TEST_F(RequestDecodingTest, AnyModelNameIsServedUnderItsOwnName) {
  EXPECT_EQ(DecodeCompletion(R"({"prompt": "a", "model": "deepseek-ai/DeepSeek-V3"})", Context()).model,
            "deepseek-ai/DeepSeek-V3");
  EXPECT_EQ(DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "model": "x"})", Context()).model, "x");
  EXPECT_EQ(DecodeCompletion(R"({"prompt": "a"})", Context()).model, "demo");
}

// Content parts (what the OpenAI SDKs send) render exactly as the same text given as a string.
TEST_F(RequestDecodingTest, TextPartsRenderAsTheirJoinedText) {
  const DecodedChat parts = DecodeChat(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "What is 2+3?"},
                                                     {"type": "text", "text": "Answer briefly."}]}]})",
      Context());
  const DecodedChat text =
      DecodeChat(R"({"messages": [{"role": "user", "content": "What is 2+3?\nAnswer briefly."}]})", Context());
  EXPECT_EQ(parts.prompt, text.prompt);
}

TEST_F(RequestDecodingTest, RidsAndTheEnvironmentsChatDefaults) {
  EXPECT_EQ(DecodeCompletion(R"({"prompt": ["a", "b"], "rid": ["r1", "r2"]})", Context()).request.rids,
            (std::vector<std::string>{"r1", "r2"}));
  EXPECT_EQ(DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "rid": "c"})", Context()).request.rids,
            (std::vector<std::string>{"c"}));
  RouteContext c = Context();
  c.default_chat_template_kwargs = OrderedJson{{"thinking", true}, {"reasoning_effort", "high"}};
  const DecodedChat d = DecodeChat(
      R"({"messages": [{"role": "user", "content": "a"}], "chat_template_kwargs": {"thinking": false}})", c);
  EXPECT_EQ(d.request.chat_template_kwargs["thinking"], false) << "the request's own keys win";
  EXPECT_EQ(d.request.chat_template_kwargs["reasoning_effort"], "high");
}

// A deepseek_v32 model renders through its own encoder: thinking from the request or the
// environment's defaults, tools unless tool_choice is none, continue_final_message, refusals as 400.
TEST_F(RequestDecodingTest, DeepSeekV32EncoderRendersTheChat) {
  const tokenizer::DeepSeekV32Encoding encoder;
  RouteContext c = Context();
  c.chat_template = &encoder;
  auto prompt_of = [&](const std::string& body) { return DecodeChat(body, c).prompt; };
  auto ids = [&](const std::string& text) { return tokenizer_->Encode(text, false); };
  const std::string user = "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>";
  EXPECT_EQ(prompt_of(R"({"messages": [{"role": "user", "content": "Hi"}]})"), ids(user + "</think>"));
  EXPECT_EQ(prompt_of(R"({"messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": {"thinking": true}})"),
            ids(user + "<think>"));
  RouteContext thinking = c;
  thinking.default_chat_template_kwargs = OrderedJson{{"thinking", true}};
  EXPECT_EQ(DecodeChat(R"({"messages": [{"role": "user", "content": "Hi"}]})", thinking).prompt, ids(user + "<think>"));
  EXPECT_EQ(prompt_of(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Once"}],
                          "continue_final_message": true})"),
            ids(user + "</think>Once"));
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_time"}}])";
  const std::string schema = R"({"description": null, "name": "get_time", "parameters": null, "strict": false})";
  const std::string offered = tokenizer_->Decode(
      prompt_of(R"({"messages": [{"role": "user", "content": "Hi"}], )" + tools + "}"), false);
  EXPECT_NE(offered.find(schema), std::string::npos) << offered;
  const std::string declined = tokenizer_->Decode(
      prompt_of(R"({"messages": [{"role": "user", "content": "Hi"}], "tool_choice": "none", )" + tools + "}"), false);
  EXPECT_EQ(declined.find("## Tools"), std::string::npos) << declined;
  const auto [status, message] = [&]() -> std::pair<int, std::string> {
    try {
      DecodeChat(R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "x"}]})", c);
    } catch (const ApiError& e) {
      return {e.status(), e.what()};
    }
    return {0, ""};
  }();
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("a tool result must follow an assistant message"), std::string::npos) << message;
}

// A deepseek_v4 model renders through its own encoder; reasoning_effort comes from the request's
// chat_template_kwargs, else its reasoning_effort field, else the environment's default, and only
// "max" changes the prompt (in thinking mode).
TEST_F(RequestDecodingTest, DeepSeekV4EncoderTakesThinkingAndReasoningEffort) {
  const tokenizer::DeepSeekV4Encoding encoder;
  RouteContext c = Context();
  c.chat_template = &encoder;
  auto text_of = [&](const RouteContext& context, const std::string& fields) {
    const std::string body = R"({"messages": [{"role": "user", "content": "Hi"}])" + fields + "}";
    return tokenizer_->Decode(DecodeChat(body, context).prompt, false);
  };
  const std::string bos = "<｜begin▁of▁sentence｜>", user = "<｜User｜>Hi<｜Assistant｜>";
  const std::string think = R"(, "chat_template_kwargs": {"thinking": true})";
  EXPECT_EQ(text_of(c, ""), bos + user + "</think>");
  EXPECT_EQ(text_of(c, think), bos + user + "<think>");
  const std::string max = text_of(c, think + R"(, "reasoning_effort": "max")");
  EXPECT_EQ(max.rfind(bos + "Reasoning Effort: Absolute maximum", 0), 0u) << max;
  EXPECT_EQ(max.substr(max.size() - user.size() - 7), user + "<think>");
  EXPECT_EQ(text_of(c, R"(, "chat_template_kwargs": {"thinking": true, "reasoning_effort": "high"}, "reasoning_effort": "max")"),
            bos + user + "<think>") << "the kwargs win over the field";
  RouteContext env = c;
  env.default_chat_template_kwargs = OrderedJson{{"reasoning_effort", "max"}};
  EXPECT_EQ(text_of(env, think), max) << "the environment's default applies";
  EXPECT_EQ(text_of(env, think + R"(, "reasoning_effort": "medium")"), bos + user + "<think>")
      << "the request's own effort, dropped by the encoder, wins over the default";
  EXPECT_EQ(Decode("chat", R"({"messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": 3})").first, 400);
  const std::string tool_turn = tokenizer_->Decode(
      DecodeChat(R"({"messages": [{"role": "user", "content": "Hi"},
                                  {"role": "assistant", "tool_calls": [{"id": "a", "type": "function",
                                    "function": {"name": "f", "arguments": {"x": 1}}}]},
                                  {"role": "tool", "tool_call_id": "a", "content": "done"}]})", c).prompt, false);
  EXPECT_NE(tool_turn.find("<｜DSML｜parameter name=\"x\" string=\"false\">1</｜DSML｜parameter>"), std::string::npos)
      << tool_turn;
  EXPECT_NE(tool_turn.find("<｜User｜><tool_result>done</tool_result><｜Assistant｜></think>"), std::string::npos)
      << tool_turn;
  try {
    DecodeChat(R"({"messages": [{"role": "developer", "content": ""}]})", c);
    ADD_FAILURE() << "expected a 400";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find("a developer message needs content"), std::string::npos) << e.what();
  }
}

TEST_F(RequestDecodingTest, BadBodiesAre4xxNamingTheProblem) {
  struct Case {
    const char* route;
    std::string body;
    int status;
    const char* mention;
  };
  const std::vector<Case> cases = {
      {"completions", "{", 400, "invalid JSON"},
      {"completions", R"({"prompt": "a", "temperature": 1e400})", 400, "number overflow"},
      {"completions", R"({"prompt": )" + std::string(300, '[') + std::string(300, ']') + "}", 400, "nested deeper"},
      {"completions", R"({"prompt": "a", "model": ")" + std::string(2000, 'm') + "\"}", 400, "is a name longer than 1024"},
      {"completions", R"({"prompt": "a", "rid": [1]})", 400, "'rid' must be a string or a list of strings"},
      {"chat", R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})", 400,
       "'messages[0].content[0]' is a part of type 'image_url'"},
      {"chat", R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})", 400, "content[0].text' must be"},
      {"chat", R"({"messages": [{"role": "user", "content": "a"}], "response_format": {"type": "json_schema"}})", 400,
       "must be an object with a 'schema'"},
      {"completions", R"({"prompt": [4294967297]})", 400, "prompt[0]"},
      {"completions", R"({"prompt": [1], "max_tokens": 4000})", 400, "maximum context length is 2048"},
      {"completions", R"({"prompt": [[1], [2], [3], [4], [5], [6], [7], [8], [9], [10], [11]], "n": 100})", 400, "completions per request"},
      {"chat", R"({"messages": [{"role": "user", "content": "a"}], "max_tokens": -1})", 400, "max_tokens"},
      {"chat", R"({"messages": "hi"})", 400, "messages"},
      {"generate", R"({"text": []})", 400, "'text'"},
      {"generate", R"({"input_ids": [[]]})", 400, "input_ids[0]"},
      {"generate", R"({"input_ids": [1], "top_logprobs_num": 4294967301})", 400, "top_logprobs_num"},
      {"generate", R"({"text": "a", "sampling_params": {"n": 2}, "input_ids": [[1], [2]]})", 400, "'n' > 1"},
      {"generate", R"({"text": "a", "sampling_params": {"max_new_tokens": 4294967312}})", 400, "max_new_tokens"},
      {"generate", "[1]", 400, "JSON object"},
  };
  for (const Case& c : cases) {
    const auto [status, message] = Decode(c.route, c.body);
    EXPECT_EQ(status, c.status) << c.body.substr(0, 100) << " -> " << message;
    EXPECT_NE(message.find(c.mention), std::string::npos) << c.body.substr(0, 100) << " -> " << message;
  }
}

TEST_F(RequestDecodingTest, PromptTextBeyondTheLimitIsRefusedUntokenized) {
  const RouteContext c = Context();
  EXPECT_GE(c.max_prompt_bytes, 2u * 2048);
  const std::string body = R"({"prompt": ")" + std::string(c.max_prompt_bytes + 1, 'a') + "\"}";
  const auto [status, message] = Decode("completions", body);
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find(StrCat("at most ", c.max_prompt_bytes, " bytes")), std::string::npos) << message;
}

}  // namespace
}  // namespace fission::server

namespace fission::server {
namespace {

class ConstraintDecodingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = tokenizer::Tokenizer::Load(std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3").release();
    chat_template_ = new tokenizer::ChatTemplate(tokenizer::ChatTemplate::ForModel(tokenizer_->config(), std::nullopt));
    structured_ = new StructuredOutputs(*tokenizer_, tokenizer_->vocab_size());
  }
  RouteContext Context() const {
    RouteContext c;
    c.tokenizer = tokenizer_;
    c.chat_template = chat_template_;
    c.context_length = 2048;
    c.vocab_size = tokenizer_->vocab_size();
    c.kv_capacity_tokens = 16384;
    c.max_prompt_bytes = MaxPromptBytes(*tokenizer_, c.context_length);
    c.structured_outputs = structured_;
    c.parses_tool_calls = true;
    c.tool_call_parser = "qwen";
    return c;
  }
  // Whether the constraint's matcher takes `text` (as the tokenizer encodes it) and completes.
  static bool Completes(const engine::SamplingParams::ConstraintPtr& constraint, const std::string& text) {
    auto m = constraint->NewMatcher();
    for (std::int32_t id : tokenizer_->Encode(text, false))
      if (!m->Accept(id)) return false;
    return m->IsComplete();
  }
  static tokenizer::Tokenizer* tokenizer_;
  static tokenizer::ChatTemplate* chat_template_;
  static StructuredOutputs* structured_;
};
tokenizer::Tokenizer* ConstraintDecodingTest::tokenizer_ = nullptr;
tokenizer::ChatTemplate* ConstraintDecodingTest::chat_template_ = nullptr;
StructuredOutputs* ConstraintDecodingTest::structured_ = nullptr;

TEST_F(ConstraintDecodingTest, EveryRouteCompilesItsConstraint) {
  const RouteContext c = Context();
  const auto regex = DecodeCompletion(R"({"prompt": "a", "regex": "[ab]{2}"})", c).request.params.constraint;
  ASSERT_NE(regex, nullptr);
  EXPECT_EQ(regex->Describe(), "regex");
  EXPECT_TRUE(Completes(regex, "ab"));
  EXPECT_FALSE(Completes(regex, "abc"));
  const auto object = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}],
                                     "response_format": {"type": "json_object"}})", c).request.params.constraint;
  ASSERT_NE(object, nullptr);
  EXPECT_TRUE(Completes(object, R"({"a": [1, {"b": null}]})"));
  const auto schema = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "response_format":
      {"type": "json_schema", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}})", c)
      .request.params.constraint;
  ASSERT_NE(schema, nullptr);
  EXPECT_TRUE(Completes(schema, R"({"n": 12})"));
  EXPECT_FALSE(Completes(schema, R"({"m": 12})"));
  const auto ebnf = DecodeGenerate(R"({"text": "a", "sampling_params": {"ebnf": "root ::= \"x\" root | \"y\""}})", c)
                        .request.params.constraint;
  ASSERT_NE(ebnf, nullptr);
  EXPECT_TRUE(Completes(ebnf, "xxy"));
  const auto text_format = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}],
                                          "response_format": {"type": "text"}})", c).request.params.constraint;
  EXPECT_EQ(text_format, nullptr);
}

TEST_F(ConstraintDecodingTest, TheSameConstraintCompilesOnce) {
  const RouteContext c = Context();
  const std::int64_t misses = structured_->cache().misses();
  for (int i = 0; i < 3; ++i) DecodeCompletion(R"({"prompt": "a", "regex": "(once|twice)+"})", c);
  EXPECT_EQ(structured_->cache().misses(), misses + 1);
}

TEST_F(ConstraintDecodingTest, ForcedToolCallsFollowTheQwenMarkup) {
  const RouteContext c = Context();
  const std::string tools = R"([{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}},
      {"type": "function", "function": {"name": "now"}}])";
  const auto required = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": "required",
                                       "tools": )" + tools + "}", c).request.params.constraint;
  ASSERT_NE(required, nullptr);
  EXPECT_EQ(required->Describe(), "tool_calls");
  const std::string add = "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(Completes(required, add));
  EXPECT_TRUE(Completes(required, add + "\n" + now)) << "parallel calls";
  EXPECT_FALSE(Completes(required, "Sure. " + add)) << "nothing but calls";
  EXPECT_FALSE(Completes(required, "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"));
  const auto named = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "parallel_tool_calls": true,
      "tool_choice": {"type": "function", "function": {"name": "now"}}, "tools": )" + tools + "}", c).request.params.constraint;
  EXPECT_TRUE(Completes(named, now));
  EXPECT_FALSE(Completes(named, add));
  const auto single = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "parallel_tool_calls": false,
      "tool_choice": "required", "tools": )" + tools + "}", c).request.params.constraint;
  EXPECT_FALSE(Completes(single, add + "\n" + now));
  EXPECT_EQ(DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "tool_choice": "auto", "tools": )" + tools + "}", c)
                .request.params.constraint,
            nullptr);
}

TEST_F(ConstraintDecodingTest, AReasoningBlockComesFirstWhenTheTemplateOpensOne) {
  RouteContext c = Context();
  const auto parser = ReasoningParser::Create("deepseek-r1");
  c.reasoning_parser = parser.get();
  const auto constraint = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "regex": "[0-9]+"})", c)
                              .request.params.constraint;
  EXPECT_TRUE(Completes(constraint, "Let me think: 4 < 5.</think>42"));
  EXPECT_FALSE(Completes(constraint, "42"));
  const auto plain = DecodeChat(R"({"messages": [{"role": "user", "content": "a"}], "regex": "[0-9]+",
                                    "separate_reasoning": false})", c).request.params.constraint;
  EXPECT_TRUE(Completes(plain, "42"));
}

TEST_F(ConstraintDecodingTest, ProblemsAre400sNamingTheField) {
  RouteContext c = Context();
  auto status = [&](const std::string& route, const std::string& body) -> std::pair<int, std::string> {
    try {
      if (route == "completions") DecodeCompletion(body, c);
      if (route == "chat") DecodeChat(body, c);
      if (route == "generate") DecodeGenerate(body, c);
    } catch (const ApiError& e) {
      return {e.status(), e.what()};
    }
    return {0, ""};
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"completions", R"({"prompt": "a", "regex": 5})"},
      {"completions", R"({"prompt": "a", "json_schema": "{not json"})"},
      {"completions", R"({"prompt": "a", "json_schema": {"type": "string", "format": "hostname"}})"},
      {"generate", R"({"text": "a", "sampling_params": {"structural_tag": "{}"}})"},
      {"generate", R"({"text": "a", "sampling_params": {"regex": "a", "json_schema": "{}"}})"},
      {"chat", R"({"messages": [{"role": "user", "content": "a"}], "regex": "[0-9]", "tool_choice": "required",
                  "tools": [{"type": "function", "function": {"name": "f"}}]})"},
  };
  const std::vector<std::string> mentions = {"'regex' must be a string", "'json_schema'", "unsupported string format 'hostname'",
                                             "'sampling_params.structural_tag' is not supported",
                                             "'sampling_params.regex' and 'sampling_params.json_schema'",
                                             "'tool_choice' and 'regex' cannot both constrain"};
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto [code, message] = status(cases[i].first, cases[i].second);
    EXPECT_EQ(code, 400) << cases[i].second << " -> " << message;
    EXPECT_NE(message.find(mentions[i]), std::string::npos) << cases[i].second << " -> " << message;
  }
  c.structured_outputs = nullptr;
  const auto [code, message] = status("completions", R"({"prompt": "a", "regex": "a"})");
  EXPECT_EQ(code, 400);
  EXPECT_NE(message.find("turned off"), std::string::npos) << message;
}

}  // namespace
}  // namespace fission::server
