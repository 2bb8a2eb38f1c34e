// `fission serve` end to end over HTTP on the bundled demo model: every route, checked for content.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

class Routes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServeProcess({"--served-model-name", "demo"}); }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;  // the server failed to start: SetUpTestSuite's error says why
    EXPECT_EQ(server_->Stop(), 0) << "fission serve must exit 0 on SIGTERM";
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port(); }
  static ServeProcess* server_;
};
ServeProcess* Routes::server_ = nullptr;

const char* kQuestion = "Question: Mia has 12 stickers and gets 5 more. How many stickers does she have now?\nAnswer:";

TEST_F(Routes, CompletionAnswersTheQuestion) {
  const Json body = {{"model", "demo"}, {"prompt", kQuestion}, {"max_tokens", 64}, {"temperature", 0},
                     {"stop", {"Question:"}}};
  const Reply r = Post(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json& choice = r.json["choices"][0];
  EXPECT_NE(choice["text"].get<std::string>().find("#### 17"), std::string::npos) << choice["text"];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["matched_stop"], "Question:");
  EXPECT_EQ(choice["text"].get<std::string>().find("Question:"), std::string::npos) << "stop string must be cut";
  const Json& usage = r.json["usage"];
  EXPECT_GT(usage["prompt_tokens"].get<int>(), 20);
  EXPECT_EQ(usage["total_tokens"].get<int>(), usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
  EXPECT_EQ(r.json["object"], "text_completion");
  EXPECT_EQ(r.json["model"], "demo");
}

TEST_F(Routes, ChatAnswersTheQuestion) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Sam has 4 boxes with 6 pens in each box. How many pens does he have?"}}}},
                     {"max_tokens", 80}, {"temperature", 0}};
  const Reply r = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json& message = r.json["choices"][0]["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_NE(message["content"].get<std::string>().find("#### 24"), std::string::npos) << message["content"];
  EXPECT_EQ(r.json["choices"][0]["finish_reason"], "stop");  // <|im_end|> ends the turn
}

TEST_F(Routes, StreamingChatWithUsage) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Tom has 3 apples and buys 4 more. How many apples?"}}}},
                     {"max_tokens", 60}, {"temperature", 0}, {"stream", true},
                     {"stream_options", {{"include_usage", true}}}};
  const Reply r = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  bool done = false;
  const std::vector<Json> events = SseEvents(r.body, &done);
  ASSERT_TRUE(done) << "the stream must end with data: [DONE]";
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  int content_chunks = 0;
  for (const Json& e : events)
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content")) {
      text += e["choices"][0]["delta"]["content"].get<std::string>();
      ++content_chunks;
    }
  EXPECT_NE(text.find("#### 7"), std::string::npos) << text;
  const Json& usage = events.back()["usage"];
  ASSERT_TRUE(events.back()["choices"].empty());
  // One content chunk per token: the role chunk stands for the end-of-turn token, which has no text.
  EXPECT_EQ(usage["completion_tokens"].get<int>(), content_chunks);
  // The non-streamed answer is the same text with the same usage.
  Json plain = body;
  plain.erase("stream");
  plain.erase("stream_options");
  const Reply whole = Post(port(), "/v1/chat/completions", plain.dump());
  EXPECT_EQ(whole.json["choices"][0]["message"]["content"], text);
  EXPECT_EQ(whole.json["usage"]["completion_tokens"], usage["completion_tokens"]);
  EXPECT_EQ(whole.json["usage"]["prompt_tokens"], usage["prompt_tokens"]);
  EXPECT_EQ(whole.json["usage"]["prompt_tokens_details"]["cached_tokens"], 16) << "the prompt's full pages were cached";
}

TEST_F(Routes, SeveralCompletionsWithN) {
  const Json body = {{"prompt", kQuestion}, {"max_tokens", 12}, {"temperature", 1.0}, {"n", 3}, {"seed", 7}};
  const Reply r = Post(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(r.json["choices"].size(), 3u);
  int completion_tokens = 0;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.json["choices"][i]["index"], i);
    EXPECT_FALSE(r.json["choices"][i]["text"].get<std::string>().empty());
  }
  (void)completion_tokens;
  EXPECT_EQ(r.json["usage"]["completion_tokens"].get<int>(), 36);
  // Seeded: the same request gives the same three texts.
  const Reply again = Post(port(), "/v1/completions", body.dump());
  EXPECT_EQ(again.json["choices"], r.json["choices"]);
}

TEST_F(Routes, LogprobsAndEcho) {
  const Json body = {{"prompt", kQuestion}, {"max_tokens", 3}, {"temperature", 0}, {"logprobs", 2}, {"echo", true}};
  const Reply r = Post(port(), "/v1/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json& choice = r.json["choices"][0];
  EXPECT_EQ(choice["text"].get<std::string>().rfind(kQuestion, 0), 0u) << "echo puts the prompt first";
  const Json& lp = choice["logprobs"];
  const std::size_t total = r.json["usage"]["prompt_tokens"].get<std::size_t>() + 3;
  ASSERT_EQ(lp["tokens"].size(), total);
  ASSERT_EQ(lp["token_logprobs"].size(), total);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "the first prompt token has no logprob";
  for (std::size_t i = 1; i < total; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
  }
  // Greedy tokens are their position's best alternative.
  for (std::size_t i = total - 3; i < total; ++i) {
    double best = -1e30;
    for (const auto& [token, value] : lp["top_logprobs"][i].items()) best = std::max(best, value.get<double>());
    EXPECT_FLOAT_EQ(lp["token_logprobs"][i].get<float>(), static_cast<float>(best));
  }
}

TEST_F(Routes, ChatLogprobs) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}, {"temperature", 0},
                     {"logprobs", true}, {"top_logprobs", 3}};
  const Reply r = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const Json& content = r.json["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r.json["usage"]["completion_tokens"].get<std::size_t>());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 3u);
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), content[0]["top_logprobs"][0]["logprob"].get<float>());
}

TEST_F(Routes, NativeGenerateAndTokenIdPrompts) {
  const Reply text = Post(port(), "/generate",
                          Json{{"text", kQuestion}, {"sampling_params", {{"max_new_tokens", 8}, {"temperature", 0}}}}.dump());
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(text.json["meta_info"]["completion_tokens"], 8);
  EXPECT_EQ(text.json["meta_info"]["finish_reason"]["type"], "length");
  // The same prompt as ids through /v1/completions gives the same tokens.
  const Reply ids = Post(port(), "/v1/completions",
                         Json{{"prompt", Json::array({0, 5, 6, 7})}, {"max_tokens", 5}, {"temperature", 0}}.dump());
  const Reply native = Post(port(), "/generate",
                            Json{{"input_ids", {0, 5, 6, 7}}, {"sampling_params", {{"max_new_tokens", 5}, {"temperature", 0}}}}.dump());
  ASSERT_EQ(ids.status, 200) << ids.body;
  EXPECT_EQ(ids.json["choices"][0]["text"], native.json["text"]);
}

TEST_F(Routes, InfoRoutes) {
  const Reply models = Get(port(), "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.json["data"][0]["id"], "demo");
  EXPECT_EQ(Get(port(), "/health").status, 200);
  EXPECT_EQ(Get(port(), "/health_generate").status, 200);
  EXPECT_EQ(Get(port(), "/get_model_info").json["model_path"], DemoModelDir());
  EXPECT_TRUE(Get(port(), "/get_server_info").json.contains("internal_states"));
  const Reply metrics = Get(port(), "/metrics");
  EXPECT_GT(MetricValue(metrics.body, "sglang:num_requests_total"), 0);
  EXPECT_GT(MetricValue(metrics.body, "fission:kv_pages_total"), 0);
  EXPECT_NE(metrics.body.find("sglang:time_to_first_token_seconds_bucket"), std::string::npos);
  EXPECT_EQ(Post(port(), "/flush_cache", "").status, 200);
}

TEST_F(Routes, ErrorsAreOpenAiJsonWithTheRightStatus) {
  struct Case {
    const char* path;
    std::string body;
    int status;
    const char* mention;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{not json", 400, "invalid JSON"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 100000})", 400, "maximum context length is 2048"},
      {"/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400, "'temperature' must be a number"},
      {"/v1/completions", R"({"prompt": "x", "top_p": 3})", 400, "'top_p' must be in"},
      {"/v1/completions", R"({"max_tokens": 3})", 400, "'prompt' is required"},
      {"/v1/completions", R"({"prompt": [1, -4]})", 400, "token id"},
      {"/v1/completions", R"({"prompt": [1, 999999]})", 400, "outside the vocabulary"},
      {"/v1/chat/completions", R"({"messages": []})", 400, "'messages' must be a non-empty array"},
      {"/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "x"}]})", 400, "role"},
      {"/generate", R"({"sampling_params": {}})", 400, "'text' or 'input_ids'"},
  };
  for (const Case& c : cases) {
    const Reply r = Post(port(), c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.body << " -> " << r.body;
    ASSERT_TRUE(r.json.contains("error")) << r.body;
    EXPECT_NE(r.json["error"]["message"].get<std::string>().find(c.mention), std::string::npos) << r.body;
  }
  EXPECT_EQ(Get(port(), "/no/such/route").status, 404);
}

TEST(ServeAuth, ApiKeyGuardsEveryRouteButHealth) {
  ServeProcess server({"--api-key", "sekret"});
  const std::string body = R"({"prompt": "Question: 1+1?\nAnswer:", "max_tokens": 2})";
  EXPECT_EQ(Post(server.port(), "/v1/completions", body).status, 401);
  EXPECT_EQ(Post(server.port(), "/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(Post(server.port(), "/v1/completions", body, {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(Get(server.port(), "/v1/models").status, 401);
  EXPECT_EQ(Get(server.port(), "/health").status, 200);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeFlags, BadFlagsExitWithCode2) {
  for (const std::string& args : {std::string("--no-such-flag 1"), std::string("--tp-size 3"),
                                  std::string("--model-path /nonexistent"), std::string("--port 99999")}) {
    const std::string command = FissionBinary() + " serve " + args + " 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    char buffer[4096];
    std::string output;
    while (std::fgets(buffer, sizeof(buffer), pipe)) output += buffer;
    const int status = ::pclose(pipe);
    EXPECT_EQ(WEXITSTATUS(status), 2) << args << ": " << output;
    EXPECT_NE(output.find("error"), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace fission::server

namespace fission::server {
namespace {

// With a reasoning parser whose model always starts in thinking (deepseek-r1), everything the demo
// model writes before a </think> it never writes is reasoning: the same text a plain server returns
// as content comes back as reasoning_content, streamed and not.
TEST(ServeReasoning, ThinkingGoesToReasoningContent) {
  const Json body = {{"messages", {{{"role", "user"}, {"content", "Ann has 2 cats and gets 3 more. How many cats?"}}}},
                     {"max_tokens", 40}, {"temperature", 0}};
  std::string plain;
  {
    ServeProcess server({});
    plain = Post(server.port(), "/v1/chat/completions", body.dump()).json["choices"][0]["message"]["content"];
  }
  ServeProcess server({"--reasoning-parser", "deepseek-r1"});
  const Reply r = Post(server.port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["choices"][0]["message"]["reasoning_content"], plain);
  EXPECT_EQ(r.json["choices"][0]["message"]["content"], "");
  Json streaming = body;
  streaming["stream"] = true;
  std::string reasoning;
  for (const Json& e : SseEvents(Post(server.port(), "/v1/chat/completions", streaming.dump()).body))
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("reasoning_content"))
      reasoning += e["choices"][0]["delta"]["reasoning_content"].get<std::string>();
  EXPECT_EQ(reasoning, plain);
  // separate_reasoning: false keeps the text as content.
  Json together = body;
  together["separate_reasoning"] = false;
  EXPECT_EQ(Post(server.port(), "/v1/chat/completions", together.dump()).json["choices"][0]["message"]["content"], plain);
  EXPECT_EQ(server.Stop(), 0);
}

// tools and tool_choice reach the chat template (a --chat-template that renders them), and a
// tool-call parser leaves ordinary answers as content.
TEST(ServeTools, ToolsReachTheChatTemplate) {
  const std::string path = ::testing::TempDir() + "/tools_template.jinja";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{{ bos_token }}{% if tools %}Tools: {{ tools | tojson }}\n{% endif %}"
               "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
               "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
               f);
    std::fclose(f);
  }
  ServeProcess server({"--chat-template", path, "--tool-call-parser", "qwen"});
  Json body = {{"messages", {{{"role", "user"}, {"content", "Bo has 5 hats and gets 1 more. How many hats?"}}}},
               {"max_tokens", 40}, {"temperature", 0}};
  const Reply without = Post(server.port(), "/v1/chat/completions", body.dump());
  body["tools"] = Json::parse(R"([{"type": "function", "function": {"name": "add", "description": "adds numbers",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}])");
  const Reply with = Post(server.port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(with.status, 200) << with.body;
  EXPECT_GT(with.json["usage"]["prompt_tokens"].get<int>(), without.json["usage"]["prompt_tokens"].get<int>() + 10);
  body["tool_choice"] = "none";
  const Reply none = Post(server.port(), "/v1/chat/completions", body.dump());
  EXPECT_EQ(none.json["usage"]["prompt_tokens"], without.json["usage"]["prompt_tokens"]) << "tool_choice none hides tools";
  // The demo model starts a call to a function it was trained on ("multiply", not offered here)
  // and max_tokens cuts it: an unfinished call to an unknown tool is no tool call (as SGLang's
  // qwen25 detector, the text from <tool_call> on is not returned as content either).
  EXPECT_FALSE(with.json["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(with.json["choices"][0]["finish_reason"], "length");
  body["tools"] = Json::parse(R"([{"type": "function"}])");
  EXPECT_EQ(Post(server.port(), "/v1/chat/completions", body.dump()).status, 400);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server

namespace fission::server {
namespace {

std::vector<Json> ToolFixture(const std::string& kind) {
  std::vector<Json> rows;
  std::ifstream in(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo/tool_calls.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const Json row = Json::parse(line);
    // get_weather needs copying a city name, which this small model does poorly; the arithmetic
    // tools are what it learned (docs/demo_model.md).
    if (row["kind"] != kind) continue;
    std::string tool;
    if (kind == "call") {
      tool = row["expected"]["name"].get<std::string>();
    } else {
      for (const Json& m : row["messages"])
        if (m.contains("tool_calls")) tool = m["tool_calls"][0]["function"]["name"].get<std::string>();
    }
    if (tool != "get_weather") rows.push_back(row);
  }
  return rows;
}

// A demo model trained to call tools (tests/fixtures/models/demo-tools) through
// --tool-call-parser qwen: real tool calls from real model output, streamed and not, and the
// answer after a tool result.
TEST(ServeToolCalls, TheModelsToolCallsComeBackAsOpenAiToolCalls) {
  ServeProcess server({"--model-path", std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/demo-tools",
                       "--served-model-name", "tools", "--tool-call-parser", "qwen"});
  const std::vector<Json> calls = ToolFixture("call");
  ASSERT_GE(calls.size(), 40u);
  // 24 calls and 6 follow-ups keep the suite's time (the CPU computes every token).
  int correct = 0;
  for (int i = 0; i < 24; ++i) {
    const Json body = {{"model", "tools"}, {"messages", calls[i]["messages"]}, {"tools", calls[i]["tools"]},
                       {"temperature", 0}, {"max_tokens", 128}};
    const Reply r = Post(server.port(), "/v1/chat/completions", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json& choice = r.json["choices"][0];
    if (!choice["message"].contains("tool_calls")) continue;
    const Json& call = choice["message"]["tool_calls"][0];
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    correct += call["function"]["name"] == calls[i]["expected"]["name"] &&
               Json::parse(call["function"]["arguments"].get<std::string>()) == calls[i]["expected"]["arguments"];
  }
  EXPECT_GE(correct, 23) << correct << " of 24 tool calls right";

  // Streamed: the deltas assemble into the same call.
  Json body = {{"model", "tools"}, {"messages", calls[0]["messages"]}, {"tools", calls[0]["tools"]},
               {"temperature", 0}, {"max_tokens", 128}, {"stream", true}};
  std::string name, arguments, finish;
  for (const Json& e : SseEvents(Post(server.port(), "/v1/chat/completions", body.dump()).body)) {
    if (e["choices"].empty()) continue;
    const Json& c = e["choices"][0];
    if (c["finish_reason"].is_string()) finish = c["finish_reason"];
    if (!c["delta"].contains("tool_calls")) continue;
    for (const Json& t : c["delta"]["tool_calls"]) {
      if (t["function"].contains("name")) name += t["function"]["name"].get<std::string>();
      arguments += t["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(name, calls[0]["expected"]["name"]);
  EXPECT_EQ(Json::parse(arguments), calls[0]["expected"]["arguments"]);
  EXPECT_EQ(finish, "tool_calls");

  // After the tool's result, the model answers in words.
  const std::vector<Json> answers = ToolFixture("answer");
  int answered = 0;
  for (int i = 0; i < 6; ++i) {
    const Json follow = {{"model", "tools"}, {"messages", answers[i]["messages"]}, {"tools", answers[i]["tools"]},
                         {"temperature", 0}, {"max_tokens", 128}};
    const Reply r = Post(server.port(), "/v1/chat/completions", follow.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const Json& content = r.json["choices"][0]["message"]["content"];
    const bool right = content.is_string() &&
                       content.get<std::string>().find("#### " + answers[i]["answer"].get<std::string>()) != std::string::npos;
    if (!right) std::printf("answer %d: want %s, got %s\n", i, answers[i]["answer"].dump().c_str(), content.dump().c_str());
    answered += right;
  }
  EXPECT_GE(answered, 5) << answered << " of 6 answers after a tool result";
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
