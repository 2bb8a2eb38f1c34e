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

#include "server/malformed_requests_testlib.h"
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

// Every class of malformed request the server has been probed with (malformed_requests_testlib.h),
// 4,600 bodies and 400 broken framings: each gets a 4xx, a good request succeeds during and
// after, and the server ends idle.
TEST(ServeAbuse, FiveThousandMalformedRequestsGetOnly4xx) {
  ServeProcess server({});
  std::mt19937_64 rng(2026);
  const std::vector<MalformedRequest> requests = MalformedRequests(rng, 4600);
  const std::string good = Json{{"prompt", kPrompt}, {"max_tokens", 2}}.dump();
  std::map<std::string, int> per_class;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const MalformedRequest& m = requests[i];
    const Reply r = Post(server.port(), m.path, m.body);
    ASSERT_TRUE(r.status >= 400 && r.status < 500 && r.json.contains("error"))
        << MalformedName(m.kind) << " request " << i << " on " << m.path << ": " << m.body.substr(0, 200) << " -> "
        << r.status << " " << r.body.substr(0, 300);
    ++per_class[MalformedName(m.kind)];
    if (i % 500 == 0) {
      ASSERT_EQ(Post(server.port(), "/v1/completions", good).status, 200) << "during, at " << i;
    }
  }
  EXPECT_EQ(per_class.size(), static_cast<std::size_t>(Malformed::kCount));
  int raw_count = 0;
  for (int round = 0; raw_count < 400; ++round) {
    for (const std::string& bytes : MalformedFraming()) {
      int status = 0;
      const std::string reply = RawExchange(server.port(), bytes, 2000, &status);
      ASSERT_TRUE(status >= 400 && status < 500) << "raw request " << raw_count << " got '" << reply.substr(0, 80) << "'";
      ++raw_count;
    }
  }
  EXPECT_GE(requests.size() + raw_count, 5000u);
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(Get(server.port(), "/health").status, 200);
  EXPECT_EQ(Post(server.port(), "/v1/completions", good).status, 200);
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
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
