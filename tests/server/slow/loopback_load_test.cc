// The slow tier's loopback load (scripts/slow_tests.sh; not in the default suite): malformed
// requests of every class from several clients at once, framing faults on raw connections and a
// good request every fraction of a second, against one `fission serve` on the demo model. Only
// 4xx may come back, every good request must succeed, and the server must end idle.
//
// FISSION_LOAD_REQUESTS sets the number of malformed bodies (default 20,000).
#include <gtest/gtest.h>

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

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

TEST(LoopbackLoad, MalformedRequestsFromManyClientsGetOnly4xx) {
  ServeProcess server({});
  const int total = EnvInt("FISSION_LOAD_REQUESTS", 20000);
  constexpr int kClients = 8;
  std::mt19937_64 rng(7);
  const std::vector<MalformedRequest> requests = MalformedRequests(rng, total);
  std::atomic<std::size_t> next{0};
  std::atomic<int> bad{0}, good_failures{0}, good_count{0};
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::map<int, int> statuses;
  std::string first_bad;
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&] {
      for (std::size_t i = next++; i < requests.size(); i = next++) {
        const MalformedRequest& m = requests[i];
        // Every sixteenth is broken HTTP framing on a fresh raw connection instead.
        int status = 0;
        if (i % 16 == 0) {
          const std::vector<std::string> framing = MalformedFraming();
          RawExchange(server.port(), framing[i % framing.size()], 5000, &status);
        } else {
          status = Post(server.port(), m.path, m.body).status;
        }
        std::lock_guard<std::mutex> lock(mutex);
        ++statuses[status];
        if (status < 400 || status >= 500) {
          if (bad++ == 0) first_bad = StrCat(MalformedName(m.kind), " on ", m.path, " -> ", status, ": ", m.body.substr(0, 200));
        }
      }
    });
  std::thread prober([&] {
    const std::string body = R"({"prompt":"Question: 5+6?\nAnswer:","max_tokens":3,"temperature":0})";
    while (!done) {
      ++good_count;
      if (Post(server.port(), "/v1/completions", body).status != 200) ++good_failures;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  for (std::thread& t : clients) t.join();
  done = true;
  prober.join();
  std::string summary;
  for (const auto& [status, count] : statuses) summary += StrCat(" ", status, ": ", count);
  std::printf("loopback load: %d malformed requests from %d clients;%s; %d good requests during\n", total, kClients,
              summary.c_str(), good_count.load());
  EXPECT_EQ(bad, 0) << first_bad;
  EXPECT_EQ(good_failures, 0) << "of " << good_count << " good requests during the load";
  EXPECT_GT(good_count, 0);
  EXPECT_TRUE(server.alive());
  EXPECT_EQ(Post(server.port(), "/v1/completions", R"({"prompt":"Hi","max_tokens":2})").status, 200) << "after";
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
