// `fission serve` against a hostile but fair client: each fault once found by probing the server
// is repeated here on the demo model, and after every test the server must be idle again (no
// request in flight, running or waiting, no KV page held by a sequence).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

std::string Nested(int depth, const std::string& inside = "") {
  return std::string(depth, '[') + inside + std::string(depth, ']');
}

std::string ErrorMessage(const Reply& r) {
  return r.json.contains("error") ? r.json["error"]["message"].get<std::string>() : "(no JSON error: " + r.body + ")";
}

class Hardening : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServeProcess({"--served-model-name", "demo"}); }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
  }
  void TearDown() override {
    ASSERT_TRUE(server_->alive()) << "the server died";
    EXPECT_EQ(WaitUntilIdle(port()), "") << "the server is not idle after the test";
  }
  static int port() { return server_->port(); }
  static void ExpectGoodRequestSucceeds() {
    const Reply r = Post(port(), "/v1/completions", R"({"prompt": "Question: 2+2?\nAnswer:", "max_tokens": 2})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
  static ServeProcess* server_;
};
ServeProcess* Hardening::server_ = nullptr;

// Fault 1: nesting 30,000 to 100,000 deep overflowed the stack (SIGSEGV). The JSON reader now
// refuses documents nested deeper than 128 levels before parsing them.
TEST_F(Hardening, DeeplyNestedJsonIsA400) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":)" + Nested(30000) + "}]}"},
      {"/v1/completions", R"({"prompt":"a","temperature":)" + Nested(100000) + "}"},
      {"/v1/completions", R"({"prompt":)" + Nested(100000) + "}"},
      {"/generate", R"({"text":)" + Nested(60000) + "}"},
      {"/generate", R"({"text":"a","sampling_params":)" + std::string(100000, '{') + "}"},
  };
  for (const auto& [path, body] : cases) {
    const Reply r = Post(port(), path, body);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body.substr(0, 200);
    EXPECT_NE(ErrorMessage(r).find("nested deeper than 128 levels"), std::string::npos) << ErrorMessage(r);
  }
  // Within the limit the document is read, and the field is judged on its own.
  const Reply shallow = Post(port(), "/v1/completions", R"({"prompt":"a","temperature":)" + Nested(100) + "}");
  EXPECT_EQ(shallow.status, 400);
  EXPECT_NE(ErrorMessage(shallow).find("'temperature' must be a number"), std::string::npos) << ErrorMessage(shallow);
  ExpectGoodRequestSucceeds();
}

// Fault 2: these error paths each leaked one in-flight request; after 4,096 of them every
// completion answered 503 until a restart. Requests now hold a ticket released however they end.
TEST_F(Hardening, ErrorPathsLeakNothing) {
  std::string ids = "5";
  for (int i = 1; i < 2048; ++i) ids += ",5";
  const std::vector<std::pair<std::string, std::string>> leaky = {
      {"/generate", R"({"text":[]})"},
      {"/generate", R"({"input_ids":[[]]})"},
      {"/v1/completions", R"({"prompt":[)" + ids + R"(],"max_tokens":0})"},
  };
  for (int round = 0; round < 1400; ++round) {
    for (const auto& [path, body] : leaky) {
      const Reply r = Post(port(), path, body);
      ASSERT_EQ(r.status, 400) << path << " " << body.substr(0, 40) << " -> " << r.body;
    }
  }
  // 4,200 refused requests, and the server has no request in flight the moment they are answered.
  EXPECT_EQ(MetricValue(Get(port(), "/metrics").body, "fission:requests_in_flight"), 0);
  ExpectGoodRequestSucceeds();
}

// Fault 4: a number beyond double's range made the completions route answer 500.
TEST_F(Hardening, NumberOverflowIsA400) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/completions", R"({"prompt":"a","temperature":1e400})"},
      {"/v1/completions", R"({"prompt":"a","max_tokens":-1e400})"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"a"}],"top_p":1e999})"},
      {"/generate", R"({"text":"a","sampling_params":{"temperature":1e400}})"},
  };
  for (const auto& [path, body] : cases) {
    const Reply r = Post(port(), path, body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    EXPECT_NE(ErrorMessage(r).find("number overflow"), std::string::npos) << ErrorMessage(r);
  }
}

// Fault 8: /generate ran input_ids [2^32 + 1] as token 1 and top_logprobs_num 2^32 + 5 as 5.
// Every integer field now has a range, and a value outside it is a 400 naming the field.
TEST_F(Hardening, IntegersAreNeverTruncated) {
  struct Case {
    const char* path;
    const char* body;
    const char* mention;
  };
  const std::vector<Case> cases = {
      {"/generate", R"({"input_ids":[4294967297]})", "input_ids[0] must be a token id"},
      {"/generate", R"({"input_ids":[1,2],"return_logprob":true,"top_logprobs_num":4294967301})", "top_logprobs_num"},
      {"/generate", R"({"text":"a","sampling_params":{"max_new_tokens":4294967312}})", "max_new_tokens"},
      {"/generate", R"({"input_ids":[18446744073709551615]})", "input_ids[0]"},
      {"/v1/completions", R"({"prompt":[4294967297]})", "prompt[0]"},
      {"/v1/completions", R"({"prompt":"a","max_tokens":18446744073709551616})", "max_tokens"},
      {"/v1/completions", R"({"prompt":"a","n":4294967297})", "'n'"},
      {"/v1/completions", R"({"prompt":"a","logprobs":4294967298})", "logprobs"},
      {"/v1/completions", R"({"prompt":"a","seed":18446744073709551615})", "seed"},
      {"/v1/completions", R"({"prompt":"a","max_tokens":2.5})", "max_tokens"},
      {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"a"}],"max_tokens":4294967297})", "max_tokens"},
  };
  for (const Case& c : cases) {
    const Reply r = Post(port(), c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.body << " -> " << r.body;
    EXPECT_NE(ErrorMessage(r).find(c.mention), std::string::npos) << c.body << " -> " << ErrorMessage(r);
  }
  // Whole numbers written as floats are the integers they denote.
  EXPECT_EQ(Post(port(), "/v1/completions", R"({"prompt":"a","max_tokens":2.0})").status, 200);
}

// Fault 10: a 50 MB model name came back whole inside a 52 MB 404 (any name of sensible length
// is served now; this one is refused). Errors quote short prefixes.
TEST_F(Hardening, BadValuesAreQuotedByAShortPrefix) {
  const std::string huge(50 << 20, 'm');
  const Reply model = Post(port(), "/v1/completions", R"({"prompt":"a","model":")" + huge + "\"}");
  EXPECT_EQ(model.status, 400);
  EXPECT_LT(model.body.size(), 4096u);
  EXPECT_NE(ErrorMessage(model).find("the model 'mmmm"), std::string::npos) << ErrorMessage(model);
  EXPECT_NE(ErrorMessage(model).find(StrCat("(", huge.size(), " bytes)")), std::string::npos) << ErrorMessage(model);
  const std::string big(1 << 20, 'r');
  for (const std::string& body :
       {R"({"messages":[{"role":")" + big + R"(","content":"a"}]})", R"({"prompt":"a","temperature":")" + big + "\"}"}) {
    const Reply r = Post(port(), body.find("messages") != std::string::npos ? "/v1/chat/completions" : "/v1/completions",
                         body);
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 200);
    EXPECT_LT(r.body.size(), 4096u);
  }
  const Reply sampling = Post(port(), "/generate", R"({"text":"a","sampling_params":{")" + big + R"(":1}})");
  EXPECT_EQ(sampling.status, 400);
  EXPECT_LT(sampling.body.size(), 4096u);
  const Reply path = Get(port(), "/" + std::string(30000, 'p'));
  EXPECT_EQ(path.status, 404);
  EXPECT_LT(path.body.size(), 4096u);
}

}  // namespace
}  // namespace fission::server

namespace fission::server {
namespace {

// Fault 6: with a KV cache smaller than one request could grow to, the request answered 500 or
// aborted mid-stream. Admission now refuses it with a 400 saying why, before anything runs.
TEST(HardeningKvCache, ARequestNoCacheCouldHoldIsA400) {
  ServeProcess server({"--max-total-tokens", "16"});
  const std::string too_long = R"({"prompt":"Q","max_tokens":30,"ignore_eos":true})";
  for (const bool stream : {false, true}) {
    Json body = Json::parse(too_long);
    body["stream"] = stream;
    const Reply r = Post(server.port(), "/v1/completions", body.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_NE(ErrorMessage(r).find("tokens of KV cache"), std::string::npos) << ErrorMessage(r);
    EXPECT_NE(ErrorMessage(r).find("the cache holds 16 tokens"), std::string::npos) << ErrorMessage(r);
  }
  // A prompt larger than the whole cache, over and over: refused, and nothing leaks.
  const std::string big_prompt = R"({"prompt":[5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5],"max_tokens":1})";
  for (int i = 0; i < 200; ++i) ASSERT_EQ(Post(server.port(), "/v1/completions", big_prompt).status, 400);
  EXPECT_EQ(MetricValue(Get(server.port(), "/metrics").body, "fission:requests_in_flight"), 0);
  // What fits runs; a chat without max_tokens is given what the cache leaves.
  const Reply fits = Post(server.port(), "/v1/completions", R"({"prompt":"Q","max_tokens":10,"ignore_eos":true})");
  ASSERT_EQ(fits.status, 200) << fits.body;
  EXPECT_EQ(fits.json["usage"]["completion_tokens"], 10);
  const Reply chat = Post(server.port(), "/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"Q"}],"ignore_eos":true})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(chat.json["usage"]["total_tokens"], 17) << "prompt and output fill the 16 cached tokens, plus the last";
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
  EXPECT_EQ(server.Stop(), 0);
}

// Preemptions are exported: four requests that each fit alone share a four-page cache.
TEST(HardeningKvCache, PreemptionsAreCounted) {
  ServeProcess server({"--max-total-tokens", "16", "--page-size", "4", "--disable-radix-cache"});
  std::vector<std::thread> threads;
  std::vector<Reply> results(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      results[i] = Post(server.port(), "/v1/completions",
                        Json{{"prompt", Json::array({0, 5 + i})}, {"max_tokens", 12}, {"ignore_eos", true}}.dump());
    });
  for (std::thread& t : threads) t.join();
  for (const Reply& r : results) {
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json["usage"]["completion_tokens"], 12);
  }
  const std::string metrics = Get(server.port(), "/metrics").body;
  EXPECT_GT(MetricValue(metrics, "fission:preemptions_total"), 0) << metrics;
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
