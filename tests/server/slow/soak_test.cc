// The slow tier's soak (scripts/slow_tests.sh; not in the default suite): minutes of mixed
// traffic against one `fission serve` on the demo model whose KV cache is small enough to
// preempt: normal requests on every route (streamed and not, n = 2), malformed ones, clients that
// vanish mid-stream, /abort_request by rid, and requests larger than the KV cache. It must end
// with nothing leaked: no request in flight, running or waiting, every KV page free after
// /flush_cache, the descriptors it had, and the memory it used after a warm-up round.
//
// FISSION_SOAK_SECONDS sets the length of the measured run (default 120).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "server/malformed_requests_testlib.h"
#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

using Clock = std::chrono::steady_clock;

enum class Kind { kCompletion, kChat, kGenerate, kStream, kMalformed, kDisconnect, kAbortByRid, kOverCache, kCount };
const char* KindName(Kind k) {
  static const char* kNames[] = {"completion", "chat", "generate", "stream", "malformed", "disconnect", "abort by rid",
                                 "over the KV cache"};
  return kNames[static_cast<int>(k)];
}

struct Tally {
  std::mutex mutex;
  std::map<std::string, int> ok, failed;
  std::string first_failure;
  void Record(Kind kind, bool good, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    ++(good ? ok : failed)[KindName(kind)];
    if (!good && first_failure.empty()) first_failure = StrCat(KindName(kind), ": ", what.substr(0, 300));
  }
};

// A stream that the client drops after its first bytes.
void Disconnect(int port, std::mt19937_64& rng) {
  const std::string body = Json{{"prompt", "Hi"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}}.dump();
  const int fd = ConnectTo(port);
  if (fd < 0) return;
  const std::string request = StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                                     "\r\n\r\n", body);
  ::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  char buffer[512];
  if (rng() % 2) ::recv(fd, buffer, sizeof(buffer), 0);  // sometimes before any answer
  ::close(fd);
}

// One request of `kind`; true when the answer is the one expected.
bool OneRequest(Kind kind, http::HttpClient& client, int port, std::mt19937_64& rng, std::string* what) {
  const int max_tokens = 1 + static_cast<int>(rng() % 24);
  Reply r;
  switch (kind) {
    case Kind::kCompletion: {
      // One in four runs long: two of those outgrow the cache together.
      const bool long_one = rng() % 4 == 0;
      r = Post(client, port, "/v1/completions",
               Json{{"prompt", "Question: Ann has 3 pens and buys 4 more. How many?\nAnswer:"},
                    {"max_tokens", long_one ? 150 : max_tokens}, {"ignore_eos", long_one},
                    {"temperature", (rng() % 3) * 0.5}, {"n", 1 + static_cast<int>(rng() % 2)}}.dump());
      break;
    }
    case Kind::kChat:
      r = Post(client, port, "/v1/chat/completions",
               Json{{"messages", {{{"role", "user"}, {"content", "Bo has 2 hats and gets 5 more. How many?"}}}},
                    {"max_tokens", max_tokens}}.dump());
      break;
    case Kind::kGenerate:
      r = Post(client, port, "/generate",
               Json{{"input_ids", {0, 44, 17, static_cast<int>(rng() % 500)}},
                    {"sampling_params", {{"max_new_tokens", max_tokens}, {"temperature", 0}}}}.dump());
      break;
    case Kind::kStream: {
      r = Post(client, port, "/v1/chat/completions",
               Json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", max_tokens}, {"stream", true},
                    {"stream_options", {{"include_usage", true}}}}.dump());
      bool done = false;
      SseEvents(r.body, &done);
      *what = r.body.substr(0, 300);
      return r.status == 200 && done;
    }
    case Kind::kMalformed: {
      const MalformedRequest m = MalformedRequests(rng, 1 + static_cast<int>(rng() % 9)).back();
      r = Post(client, port, m.path, m.body);
      *what = StrCat(MalformedName(m.kind), " -> ", r.status, " ", r.body);
      return r.status >= 400 && r.status < 500;
    }
    case Kind::kDisconnect:
      Disconnect(port, rng);
      return true;
    case Kind::kAbortByRid: {
      const std::string rid = StrCat("soak-", rng());
      Reply aborted;
      std::thread request([&] {
        aborted = Post(client, port, "/generate",
                       Json{{"text", "Hi"}, {"rid", rid}, {"sampling_params", {{"max_new_tokens", 200}, {"ignore_eos", true}}}}.dump());
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Post(client, port, "/abort_request", Json{{"rid", rid}}.dump());
      request.join();
      *what = aborted.body.substr(0, 300);
      return aborted.status == 200 && aborted.json.contains("meta_info");
    }
    case Kind::kOverCache: {
      std::vector<int> ids(200, 7);
      r = Post(client, port, "/v1/completions", Json{{"prompt", ids}, {"max_tokens", 100}}.dump());
      *what = r.body.substr(0, 300);
      return r.status == 400 && r.body.find("KV cache") != std::string::npos;
    }
    case Kind::kCount:
      break;
  }
  *what = StrCat(r.status, " ", r.body.substr(0, 300));
  return r.status == 200;
}

// `clients` threads send random requests for `seconds`.
void Traffic(int port, int clients, double seconds, std::uint64_t seed, Tally* tally) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([=] {
      http::HttpClient client;  // its connections close with it
      std::mt19937_64 rng(seed + c);
      while (Clock::now() < end) {
        const Kind kind = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
        std::string what;
        tally->Record(kind, OneRequest(kind, client, port, rng, &what), what);
      }
    });
  for (std::thread& t : threads) t.join();
}

struct Usage {
  int fds = 0;
  std::int64_t rss = 0;
};

// Idle, the prefix cache flushed, and the descriptors settled: what the server holds at rest.
Usage AtRest(const ServeProcess& server, int expected_fds) {
  EXPECT_EQ(WaitUntilIdle(server.port(), 20000), "");
  EXPECT_EQ(Post(server.port(), "/flush_cache", "").status, 200);
  std::string metrics;
  for (int i = 0; i < 200; ++i) {
    metrics = Get(server.port(), "/metrics").body;
    if (MetricValue(metrics, "fission:kv_pages_free") == MetricValue(metrics, "fission:kv_pages_total")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(MetricValue(metrics, "fission:kv_pages_free"), MetricValue(metrics, "fission:kv_pages_total")) << metrics;
  // The server closes the connections of finished clients as it sees them go.
  Usage u;
  for (int i = 0; i < 500; ++i) {
    u.fds = OpenFileCount(server.pid());
    if (expected_fds == 0 || u.fds <= expected_fds) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  u.rss = ResidentBytes(server.pid());
  return u;
}

TEST(Soak, MixedTrafficLeaksNothing) {
  const char* env = std::getenv("FISSION_SOAK_SECONDS");
  const double seconds = env ? std::atof(env) : 120.0;
  constexpr int kClients = 6;
  // 16 pages of 16 tokens: six clients outgrow it, so sequences are preempted and recomputed.
  ServeProcess server({"--max-total-tokens", "256", "--max-running-requests", "32"});
  Tally warmup, soak;
  Traffic(server.port(), kClients, std::max(5.0, seconds / 10), 1, &warmup);
  const Usage start = AtRest(server, 0);
  Traffic(server.port(), kClients, seconds / 2, 100, &soak);
  const Usage middle = AtRest(server, start.fds);
  Traffic(server.port(), kClients, seconds / 2, 200, &soak);
  const Usage end = AtRest(server, start.fds);
  const std::string metrics = Get(server.port(), "/metrics").body;

  int total = 0;
  std::string counts;
  for (const auto& [kind, n] : soak.ok) {
    counts += StrCat(" ", kind, " ", n, ";");
    total += n;
  }
  std::printf("soak: %.0f s, %d clients, %d requests as expected:%s failures %zu\n", seconds, kClients, total,
              counts.c_str(), soak.failed.size());
  std::printf("soak: preemptions %.0f; fds start %d, middle %d, end %d; RSS start %.1f MiB, middle %.1f MiB, end %.1f MiB\n",
              MetricValue(metrics, "fission:preemptions_total"), start.fds, middle.fds, end.fds, start.rss / 1048576.0,
              middle.rss / 1048576.0, end.rss / 1048576.0);
  EXPECT_TRUE(soak.failed.empty()) << soak.first_failure;
  EXPECT_EQ(soak.ok.size(), static_cast<std::size_t>(Kind::kCount)) << "every kind of request ran";
  EXPECT_EQ(end.fds, start.fds);
  // Allocators keep some freed memory; a leak grows with the traffic, half after half.
  EXPECT_LT(end.rss - start.rss, 32 << 20);
  EXPECT_LT(end.rss - middle.rss, 16 << 20);
  EXPECT_GT(MetricValue(metrics, "fission:preemptions_total"), 0) << "the cache was small enough to preempt";
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
