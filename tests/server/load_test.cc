// The server under load and abuse: hundreds of concurrent streams, a thousand idle keep-alive
// connections, clients that vanish mid-stream, and thousands of malformed requests.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <map>
#include <random>
#include <thread>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

const char* kPrompt = "Question: Lee has 9 shells and finds 6 more. How many shells does he have?\nAnswer:";

struct StreamResult {
  std::string body;
  std::string error;
  bool complete = false;
};

// Starts `count` streaming completions at once and waits for all of them.
std::vector<StreamResult> ConcurrentStreams(int port, int count, const Json& body) {
  http::HttpClient client(http::ClientOptions{.io_threads = 2});
  std::vector<StreamResult> results(count);
  std::mutex mutex;
  std::condition_variable cv;
  int done = 0;
  for (int i = 0; i < count; ++i) {
    http::ClientRequest request =
        http::ClientRequest::Post(http::Url::Parse(StrCat("http://127.0.0.1:", port)), "/v1/completions", body.dump());
    request.timeout = std::chrono::seconds(600);
    http::ResponseHandlers handlers;
    handlers.on_data = [&results, i](std::string_view data, http::Clock::time_point) { results[i].body += data; };
    handlers.on_complete = [&, i](const std::string& error, http::Clock::time_point) {
      std::lock_guard<std::mutex> lock(mutex);
      results[i].error = error;
      results[i].complete = true;
      ++done;
      cv.notify_all();
    };
    client.Start(std::move(request), std::move(handlers));
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait_for(lock, std::chrono::seconds(900), [&] { return done == count; });
  return results;
}

TEST(ServeLoad, TwoHundredFiftySixConcurrentStreamsAllCompleteWithUsage) {
  ServeProcess server({"--max-running-requests", "256"});
  const Json body = {{"prompt", kPrompt}, {"max_tokens", 6}, {"ignore_eos", true}, {"temperature", 0},
                     {"stream", true}, {"stream_options", {{"include_usage", true}}}};
  const std::vector<StreamResult> results = ConcurrentStreams(server.port(), 256, body);
  int ok = 0;
  for (const StreamResult& r : results) {
    ASSERT_TRUE(r.complete);
    ASSERT_TRUE(r.error.empty()) << r.error;
    bool done = false;
    const std::vector<Json> events = SseEvents(r.body, &done);
    ASSERT_TRUE(done);
    const Json& usage = events.back()["usage"];
    EXPECT_EQ(usage["completion_tokens"], 6);
    EXPECT_EQ(usage["total_tokens"].get<int>(), usage["prompt_tokens"].get<int>() + 6);
    std::string text;
    for (const Json& e : events)
      if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
    EXPECT_FALSE(text.empty());
    ++ok;
  }
  EXPECT_EQ(ok, 256);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeLoad, HoldsAThousandIdleKeepAliveConnections) {
  ServeProcess server({});
  std::vector<int> sockets;
  for (int i = 0; i < 1000; ++i) {
    const int fd = ConnectTo(server.port());
    ASSERT_GE(fd, 0) << "connection " << i;
    sockets.push_back(fd);
  }
  // A keep-alive request on some of them, answered while all are open.
  for (int i = 0; i < 1000; i += 250) {
    const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::send(sockets[i], request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    char buffer[512];
    const ssize_t n = ::recv(sockets[i], buffer, sizeof(buffer), 0);
    ASSERT_GT(n, 12);
    EXPECT_EQ(std::string(buffer, 12), "HTTP/1.1 200");
  }
  const Reply r = Post(server.port(), "/v1/completions", Json{{"prompt", kPrompt}, {"max_tokens", 4}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(server.alive());
  for (int fd : sockets) ::close(fd);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeLoad, ClientsThatDisconnectMidStreamFreeTheirPages) {
  ServeProcess server({"--disable-radix-cache"});
  const std::string body = Json{{"prompt", kPrompt}, {"max_tokens", 400}, {"ignore_eos", true},
                                {"stream", true}}.dump();
  const std::string request = StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
                                     "Content-Length: ", body.size(), "\r\n\r\n", body);
  std::vector<int> sockets;
  for (int i = 0; i < 16; ++i) {
    const int fd = ConnectTo(server.port());
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
    sockets.push_back(fd);
  }
  // Wait until every stream has produced something, then drop them all.
  for (int fd : sockets) {
    char buffer[2048];
    ASSERT_GT(::recv(fd, buffer, sizeof(buffer), 0), 0);
  }
  const std::string during = Get(server.port(), "/metrics").body;
  EXPECT_LT(MetricValue(during, "fission:kv_pages_free"), MetricValue(during, "fission:kv_pages_total"));
  for (int fd : sockets) ::close(fd);
  std::string after;
  for (int i = 0; i < 500; ++i) {
    after = Get(server.port(), "/metrics").body;
    if (MetricValue(after, "fission:kv_pages_free") == MetricValue(after, "fission:kv_pages_total") &&
        MetricValue(after, "fission:requests_in_flight") == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(MetricValue(after, "fission:kv_pages_free"), MetricValue(after, "fission:kv_pages_total")) << after;
  EXPECT_EQ(MetricValue(after, "fission:requests_in_flight"), 0);
  EXPECT_EQ(MetricValue(after, "sglang:num_running_reqs"), 0);
  EXPECT_EQ(server.Stop(), 0);
}

// Malformed requests by construction: truncated JSON, fields of the wrong type or range, non-JSON
// bytes, and broken HTTP framing. Every one must get a 4xx (or, for framing the parser cannot
// recover from, a closed connection after a 4xx), and the server must stay up.
std::vector<std::string> MalformedBodies(std::mt19937_64& rng, int count) {
  const std::vector<std::string> valid = {
      Json{{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0.5}, {"stop", {"Q"}}}.dump(),
      Json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}}.dump(),
  };
  const std::vector<std::pair<std::string, Json>> wrong = {
      {"prompt", 5}, {"prompt", Json::object()}, {"prompt", Json::array()}, {"max_tokens", -1},
      {"max_tokens", "many"}, {"max_tokens", 1e12}, {"temperature", "hot"}, {"temperature", -1},
      {"top_p", 2}, {"top_k", "k"}, {"n", 0}, {"n", 1000}, {"stop", 7}, {"stop", {1, 2}},
      {"logprobs", 99}, {"logprobs", "yes"}, {"echo", "yes"}, {"stream", 1}, {"seed", "s"},
      {"presence_penalty", 9}, {"frequency_penalty", -9}, {"stream_options", 3}, {"model", 42},
      {"model", "gpt-4"}, {"messages", "hi"}, {"messages", {{{"content", "no role"}}}}, {"regex", ".*"},
      {"logit_bias", {{"1", 100}}}, {"min_p", 5}, {"stop_token_ids", "x"}, {"repetition_penalty", 0}};
  std::vector<std::string> bodies;
  std::uniform_int_distribution<int> kind(0, 2);
  while (static_cast<int>(bodies.size()) < count) {
    const std::string& base = valid[rng() % valid.size()];
    switch (kind(rng)) {
      case 0:  // truncated JSON
        bodies.push_back(base.substr(0, rng() % (base.size() - 1)));
        break;
      case 1: {  // one field wrong
        Json j = Json::parse(base);
        const auto& [key, value] = wrong[rng() % wrong.size()];
        if ((key == "messages") != j.contains("messages")) continue;
        j[key] = value;
        bodies.push_back(j.dump());
        break;
      }
      default: {  // bytes that are not JSON
        std::string junk(1 + rng() % 64, '\0');
        for (char& c : junk) c = static_cast<char>(rng() % 256);
        if (junk[0] == '{' || junk[0] == '[' || junk[0] == '"' || (junk[0] >= '0' && junk[0] <= '9')) junk[0] = '#';
        bodies.push_back(junk);
      }
    }
  }
  return bodies;
}

TEST(ServeAbuse, FiveThousandMalformedRequestsGetOnly4xx) {
  ServeProcess server({});
  std::mt19937_64 rng(2026);
  const std::vector<std::string> bodies = MalformedBodies(rng, 4600);
  std::map<int, int> statuses;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    const bool chat = bodies[i].find("messages") != std::string::npos;
    const Reply r = Post(server.port(), chat ? "/v1/chat/completions" : "/v1/completions", bodies[i]);
    ++statuses[r.status];
    ASSERT_TRUE(r.status >= 400 && r.status < 500) << "body " << i << ": " << bodies[i] << " -> " << r.status << " "
                                                  << r.body;
  }
  // Broken framing and headers, over raw connections.
  const std::vector<std::string> raw = {
      "GARBAGE\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{\"a\":",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
      "GET /v1/completions HTTP/1.1\r\nHost: x\r\n\r\n",
      "DELETE /health HTTP/1.1\r\nHost: x\r\n\r\n",
      "POST /v1/completions HTTP/9.9\r\nHost: x\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n[]",
      StrCat("GET /", std::string(100000, 'a'), " HTTP/1.1\r\nHost: x\r\n\r\n"),
      StrCat("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ", std::string(100000, 'b'), "\r\n\r\n"),
      "POST /generate HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{\"text\":1",
  };
  int raw_count = 0;
  for (int round = 0; raw_count < 400; ++round) {
    for (const std::string& bytes : raw) {
      int status = 0;
      const std::string reply = RawExchange(server.port(), bytes, 2000, &status);
      ASSERT_TRUE(status >= 400 && status < 500) << "raw request " << raw_count << " got '" << reply.substr(0, 80) << "'";
      ++raw_count;
    }
  }
  EXPECT_GE(bodies.size() + raw_count, 5000u);
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(Get(server.port(), "/health").status, 200);
  EXPECT_EQ(Post(server.port(), "/v1/completions", Json{{"prompt", kPrompt}, {"max_tokens", 2}}.dump()).status, 200);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeParity, GreedyOverHttpEqualsFissionGenerate) {
  ServeProcess server({});
  const std::vector<int> prompt = {0, 44, 17, 120, 5, 9, 300, 31};
  const Reply r = Post(server.port(), "/generate",
                       Json{{"input_ids", prompt}, {"sampling_params", {{"max_new_tokens", 24}, {"temperature", 0}}}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::string ids;
  for (int id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  FILE* pipe = ::popen((FissionBinary() + " generate --model-path " + DemoModelDir() + " --prompt-ids " + ids +
                        " --max-new-tokens 24 2>/dev/null")
                           .c_str(),
                       "r");
  char line[8192] = {0};
  ASSERT_NE(std::fgets(line, sizeof(line), pipe), nullptr);
  ::pclose(pipe);
  std::string http_ids;
  for (const Json& id : r.json["output_ids"]) http_ids += (http_ids.empty() ? "" : ",") + std::to_string(id.get<int>());
  EXPECT_EQ(std::string(line).substr(0, std::string(line).find('\n')), http_ids);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
