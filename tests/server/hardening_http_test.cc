// `fission serve` at the HTTP level against a hostile but fair client: huge prompts, running out
// of file descriptors, HTTP/1.0, HEAD, half-closed connections, and shutdown with streams open.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

using Clock = std::chrono::steady_clock;

std::string PostBytes(const std::string& path, const std::string& body, const std::string& version = "1.1") {
  return StrCat("POST ", path, " HTTP/", version, "\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ",
                body.size(), "\r\n\r\n", body);
}

std::string Headers(const std::string& reply) { return reply.substr(0, reply.find("\r\n\r\n") + 2); }
std::string Body(const std::string& reply) {
  const std::size_t end = reply.find("\r\n\r\n");
  return end == std::string::npos ? "" : reply.substr(end + 4);
}
int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

const std::string kStream = R"({"prompt":"Question: 3+4?\nAnswer:","max_tokens":6,"ignore_eos":true,"stream":true})";
const std::string kPlain = R"({"prompt":"Question: 3+4?\nAnswer:","max_tokens":6,"ignore_eos":true})";

// Fault 9: HEAD /health was a 405 with a body; HTTP/1.0 clients got chunked streams; streams
// repeated Cache-Control; a client that half-closed after its request got no answer.
TEST(HardeningHttp, HeadHttp10CacheControlAndHalfClose) {
  ServeProcess server({});
  const std::string head = ExchangeToClose(server.port(), "HEAD /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_NE(head.find("Content-Length: 0\r\n"), std::string::npos) << head;
  const std::string head_models = ExchangeToClose(server.port(), "HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  EXPECT_EQ(head_models.rfind("HTTP/1.1 200", 0), 0u) << head_models;
  EXPECT_EQ(Body(head_models), "") << "a HEAD answer has no body";
  EXPECT_EQ(Headers(head_models).find("Content-Length: 0\r\n"), std::string::npos) << "the GET answer's length";
  const std::string head_post = ExchangeToClose(server.port(), "HEAD /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  EXPECT_EQ(head_post.rfind("HTTP/1.1 405", 0), 0u) << head_post;
  EXPECT_EQ(Body(head_post), "");

  // HTTP/1.0: no chunking; the body is the events, ended by closing the connection.
  const std::string old = ExchangeToClose(server.port(), PostBytes("/v1/completions", kStream, "1.0"), false);
  EXPECT_EQ(old.rfind("HTTP/1.1 200", 0), 0u) << old;
  EXPECT_EQ(Headers(old).find("Transfer-Encoding"), std::string::npos) << Headers(old);
  EXPECT_NE(Headers(old).find("Connection: close"), std::string::npos) << Headers(old);
  EXPECT_EQ(Body(old).rfind("data: {", 0), 0u) << Body(old);
  EXPECT_EQ(Body(old).substr(Body(old).size() - 14), "data: [DONE]\n\n") << Body(old);

  // HTTP/1.1 streams: one Cache-Control, chunked, ended by the last chunk.
  const std::string chunked = ExchangeToClose(server.port(), PostBytes("/v1/completions", kStream) , true);
  EXPECT_EQ(Count(Headers(chunked), "Cache-Control"), 1) << Headers(chunked);
  EXPECT_NE(Headers(chunked).find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(chunked.find("data: [DONE]"), std::string::npos) << "half-closed, the stream is still answered";
  EXPECT_EQ(chunked.substr(chunked.size() - 5), "0\r\n\r\n");

  // Half-closed, a plain request is answered too, on every generation route.
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/completions", kPlain},
           {"/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3})"},
           {"/generate", R"({"text":"Hi","sampling_params":{"max_new_tokens":3}})"}}) {
    const std::string reply = ExchangeToClose(server.port(), PostBytes(path, body), true);
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << path << ": " << reply;
    EXPECT_NE(Body(reply).find("\"completion_tokens\""), std::string::npos) << path << ": " << reply;
  }
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
  EXPECT_EQ(server.Stop(), 0);
}

// Fault 5: three concurrent 50 MB prompts kept /health waiting 6-8 s, because parsing and
// tokenizing ran on the network threads. They now run on the work pool, and a prompt text longer
// than the context could hold is refused before tokenizing.
TEST(HardeningHttp, HugePromptsDoNotStallHealth) {
  ServeProcess server({});
  const std::string huge(50 << 20, 'a');
  std::vector<std::thread> senders;
  std::vector<Reply> replies(3);
  std::atomic<int> done{0};
  for (int i = 0; i < 3; ++i)
    senders.emplace_back([&, i] {
      const std::string body = i == 2 ? R"({"messages":[{"role":"user","content":")" + huge + "\"}]}"
                                      : R"({"prompt":")" + huge + "\"}";
      replies[i] = Post(server.port(), i == 2 ? "/v1/chat/completions" : "/v1/completions", body);
      ++done;
    });
  double worst = 0;
  int probes = 0;
  while (done < 3) {
    const auto start = Clock::now();
    ASSERT_EQ(Get(server.port(), "/health").status, 200);
    worst = std::max(worst, std::chrono::duration<double>(Clock::now() - start).count());
    ++probes;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (std::thread& t : senders) t.join();
  for (const Reply& r : replies) {
    EXPECT_EQ(r.status, 400) << r.body.substr(0, 300);
    EXPECT_NE(r.body.find("bytes of text"), std::string::npos) << r.body.substr(0, 300);
  }
  EXPECT_LT(worst, 1.0) << "the slowest of " << probes << " /health probes took " << worst << " s";
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
  EXPECT_EQ(server.Stop(), 0);
}

// The test opens many sockets itself.
void RaiseOwnFileLimit(rlim_t at_least) {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < at_least && limit.rlim_max >= at_least) {
    limit.rlim_cur = at_least;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

std::vector<int> OpenIdle(int port, int count) {
  std::vector<int> sockets;
  for (int i = 0; i < count; ++i) {
    const int fd = ConnectTo(port);
    if (fd >= 0) sockets.push_back(fd);
  }
  return sockets;
}

// Fault 3, first half: the server never raised its own soft limit of 1024 descriptors.
TEST(HardeningFiles, TheServerRaisesItsSoftLimit) {
  rlimit own{};
  ::getrlimit(RLIMIT_NOFILE, &own);
  if (own.rlim_max < 4096) GTEST_SKIP() << "the hard limit is " << own.rlim_max;
  RaiseOwnFileLimit(4096);
  ServeProcess server({}, {.open_files_soft = 1024, .open_files_hard = 4096});
  std::vector<int> idle = OpenIdle(server.port(), 1100);
  ASSERT_EQ(idle.size(), 1100u);
  const auto start = Clock::now();
  EXPECT_EQ(Get(server.port(), "/health").status, 200);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 2.0);
  EXPECT_GT(OpenFileCount(server.pid()), 1100);
  for (int fd : idle) ::close(fd);
  EXPECT_EQ(server.Stop(), 0);
}

// Fault 3, second half: out of descriptors, the accept loop spun at 98% CPU writing ~20 MB/s of
// log. It now backs off, logs once, and serves again when descriptors come back.
TEST(HardeningFiles, AcceptBacksOffWhenDescriptorsRunOut) {
  RaiseOwnFileLimit(2048);
  ServeProcess server({}, {.open_files_soft = 256, .open_files_hard = 256});
  std::vector<int> idle = OpenIdle(server.port(), 400);  // the backlog takes what the server cannot
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double cpu_before = CpuSeconds(server.pid());
  const auto log_before = std::filesystem::file_size(server.log_path());
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double cpu = CpuSeconds(server.pid()) - cpu_before;
  const auto log_growth = std::filesystem::file_size(server.log_path()) - log_before;
  EXPECT_LT(cpu, 0.2) << "CPU seconds used in one second while out of descriptors";
  EXPECT_LT(log_growth, 1024u) << "bytes of log written in that second";
  for (int fd : idle) ::close(fd);
  // Descriptors come back as the server sees the closed connections: it serves again.
  const auto start = Clock::now();
  int status = 0;
  while (Clock::now() - start < std::chrono::seconds(10) && (status = Get(server.port(), "/health").status) != 200)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
