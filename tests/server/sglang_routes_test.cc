// What a client of SGLang's server expects beyond generation, against `fission serve` on the demo
// model: any model name served, content parts, aborts by rid on every route, /v1/models/{id},
// /tokenize and /detokenize, /get_load, the profile window, the dashboard's metrics, the
// environment's variables, and every refusal of a bad command line in one message.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "base/error.h"
#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

class SglangRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServeProcess({"--served-model-name", "demo"}); }
  static void TearDownTestSuite() {
    if (server_ == nullptr) return;
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port(); }
  static ServeProcess* server_;
};
ServeProcess* SglangRoutes::server_ = nullptr;

const char* kQuestion = "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:";

TEST_F(SglangRoutes, AnyModelNameIsAnsweredUnderThatName) {
  const Reply r = Post(port(), "/v1/completions",
                       Json{{"model", "deepseek-ai/DeepSeek-V3"}, {"prompt", kQuestion}, {"max_tokens", 4}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json["model"], "deepseek-ai/DeepSeek-V3");
  EXPECT_EQ(Get(port(), "/v1/models").json["data"][0]["id"], "demo") << "the list names the served model";
  const Reply card = Get(port(), "/v1/models/demo");
  ASSERT_EQ(card.status, 200) << card.body;
  EXPECT_EQ(card.json["id"], "demo");
  EXPECT_EQ(card.json["object"], "model");
  EXPECT_EQ(Get(port(), "/v1/models/deepseek-ai/DeepSeek-V3").status, 404);
}

TEST_F(SglangRoutes, ContentPartsAnswerAsTheirText) {
  auto ask = [&](const Json& content) {
    return Post(port(), "/v1/chat/completions",
                Json{{"messages", {{{"role", "user"}, {"content", content}}}}, {"max_tokens", 24}, {"temperature", 0}}
                    .dump());
  };
  const Reply parts = ask(Json::array({{{"type", "text"}, {"text", "Tom has 3 apples and buys 4 more."}},
                                       {{"type", "text"}, {"text", "How many apples does he have?"}}}));
  const Reply text = ask("Tom has 3 apples and buys 4 more.\nHow many apples does he have?");
  ASSERT_EQ(parts.status, 200) << parts.body;
  EXPECT_EQ(parts.json["choices"][0]["message"]["content"], text.json["choices"][0]["message"]["content"]);
  const Reply image = ask(Json::array({{{"type", "image_url"}, {"image_url", {{"url", "http://x/y.png"}}}}}));
  EXPECT_EQ(image.status, 400);
  EXPECT_NE(image.body.find("text only"), std::string::npos) << image.body;
}

TEST_F(SglangRoutes, TokenizeAndDetokenizeRoundTrip) {
  const Reply one = Post(port(), "/tokenize", Json{{"prompt", "Tom has 3 apples."}}.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.json["count"], one.json["tokens"].size());
  EXPECT_GT(one.json["max_model_len"].get<int>(), 0);
  const Reply back = Post(port(), "/v1/detokenize", Json{{"tokens", one.json["tokens"]}}.dump());
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(back.json["text"], "Tom has 3 apples.");
  const Reply many = Post(port(), "/v1/tokenize", Json{{"prompt", {"a", "b c"}}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(many.status, 200) << many.body;
  ASSERT_EQ(many.json["tokens"].size(), 2u);
  const Reply texts = Post(port(), "/detokenize", Json{{"tokens", many.json["tokens"]}}.dump());
  EXPECT_EQ(texts.json["text"], Json::array({"a", "b c"}));
  EXPECT_EQ(Post(port(), "/detokenize", R"({"tokens": [1, 99999999]})").status, 400);
  EXPECT_EQ(Post(port(), "/tokenize", R"({"prompt": 5})").status, 400);
}

TEST_F(SglangRoutes, AbortByRidEndsACompletionStreamCleanly) {
  Reply stream;
  std::thread client([&] {
    stream = Post(port(), "/v1/completions",
                  Json{{"prompt", kQuestion}, {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true},
                       {"rid", "abort-me"}}
                      .dump());
  });
  int aborted = 0;
  for (int i = 0; i < 500 && aborted == 0; ++i) {
    aborted = Post(port(), "/abort_request", R"({"rid": "abort-me"})").json.value("aborted", 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  client.join();
  EXPECT_EQ(aborted, 1);
  ASSERT_EQ(stream.status, 200) << stream.body.substr(0, 300);
  bool done = false;
  const std::vector<Json> events = SseEvents(stream.body, &done);
  EXPECT_TRUE(done) << "the aborted stream still ends with [DONE]";
  ASSERT_FALSE(events.empty());
  std::string reason;
  for (const Json& e : events)
    if (e.contains("choices") && !e["choices"].empty() && !e["choices"][0]["finish_reason"].is_null())
      reason = e["choices"][0]["finish_reason"];
  EXPECT_EQ(reason, "abort");
  EXPECT_EQ(WaitUntilIdle(port()), "");
}

TEST_F(SglangRoutes, AbortAllEndsAChatRequest) {
  Reply chat;
  std::thread client([&] {
    chat = Post(port(), "/v1/chat/completions",
                Json{{"messages", {{{"role", "user"}, {"content", "Count."}}}}, {"max_tokens", 1500},
                     {"ignore_eos", true}}
                    .dump());
  });
  int aborted = 0;
  for (int i = 0; i < 500 && aborted == 0; ++i) {
    aborted = Post(port(), "/abort_request", R"({"abort_all": true})").json.value("aborted", 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  client.join();
  EXPECT_GE(aborted, 1);
  ASSERT_EQ(chat.status, 200) << chat.body.substr(0, 300);
  EXPECT_EQ(chat.json["choices"][0]["finish_reason"], "abort");
  EXPECT_EQ(WaitUntilIdle(port()), "");
}

TEST_F(SglangRoutes, LoadProfileAndDashboardMetrics) {
  const Reply load = Get(port(), "/get_load");
  ASSERT_EQ(load.status, 200) << load.body;
  ASSERT_TRUE(load.json.is_array());
  EXPECT_EQ(load.json[0]["dp_rank"], 0);
  EXPECT_TRUE(load.json[0].contains("num_reqs") && load.json[0].contains("num_tokens"));

  const std::string dir = ::testing::TempDir() + "/fission_profile_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  ASSERT_EQ(Post(port(), "/start_profile", Json{{"output_dir", dir}}.dump()).status, 200);
  EXPECT_EQ(Post(port(), "/start_profile", "{}").status, 400) << "one profile at a time";
  ASSERT_EQ(Post(port(), "/v1/completions", Json{{"prompt", kQuestion}, {"max_tokens", 6}, {"ignore_eos", true}}.dump())
                .status,
            200);
  const Reply stop = Post(port(), "/stop_profile", "{}");
  ASSERT_EQ(stop.status, 200) << stop.body;
  // The answer can leave before the engine adds its last step to the counters: the prompt's step
  // is surely in the window, the last decode step may not be.
  const Json& profile = stop.json["profile"];
  EXPECT_GT(profile["prompt_tokens_computed"].get<int>() + profile["prefix_hit_tokens"].get<int>(), 10) << stop.body;
  EXPECT_GE(stop.json["profile"]["generated_tokens"].get<int>(), 5) << stop.body;
  EXPECT_GE(stop.json["profile"]["steps"].get<int>(), 5) << stop.body;
  EXPECT_TRUE(std::filesystem::exists(stop.json["path"].get<std::string>()));
  EXPECT_EQ(Post(port(), "/stop_profile", "{}").status, 400);

  const std::string metrics = Get(port(), "/metrics").body;
  EXPECT_GT(MetricValue(metrics, "sglang:time_per_output_token_seconds_count"), 0) << metrics;
  EXPECT_GE(MetricValue(metrics, "sglang:gen_throughput"), 0) << metrics;
}

// The server's start-up, with the process environment and command line it is given.
TEST(SglangStartUp, EnvironmentVariablesTakeEffectOrAreListed) {
  ::setenv("SGLANG_ENABLE_SOMETHING_ELSE", "1", 1);
  ::setenv("AITER_SOME_KNOB", "0", 1);
  ServeProcess server({});
  ::unsetenv("SGLANG_ENABLE_SOMETHING_ELSE");
  ::unsetenv("AITER_SOME_KNOB");
  std::ifstream log(server.log_path());
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("environment variables with no effect in Fission: AITER_SOME_KNOB SGLANG_ENABLE_SOMETHING_ELSE"),
            std::string::npos)
      << text;
  EXPECT_EQ(server.Stop(), 0);

  ::setenv("SGLANG_DEFAULT_THINKING", "maybe", 1);
  std::string error;
  try {
    ServeProcess bad({"--host", "no-such-host.invalid", "--dp-size", "2"});
  } catch (const Error& e) {
    error = e.what();
  }
  ::unsetenv("SGLANG_DEFAULT_THINKING");
  for (const char* part : {"3 problems", "SGLANG_DEFAULT_THINKING='maybe'", "--host 'no-such-host.invalid'", "--dp-size (2)"})
    EXPECT_NE(error.find(part), std::string::npos) << part << " missing from: " << error;
}

TEST(SglangStartUp, LocalhostIsAHost) {
  ServeProcess server({"--host", "localhost"});
  EXPECT_EQ(Get(server.port(), "/health").status, 200);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
