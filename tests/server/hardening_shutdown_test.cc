// Fault 7: at shutdown, streams still running after the fixed 30 s grace were cut with no final
// event, no [DONE] and no chunk terminator, and the grace could not be changed. Now
// --graceful-shutdown-timeout sets it, and what is still running after it is cancelled with a
// proper ending: an error event, [DONE] and the last chunk for a stream, a 503 otherwise.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

using Clock = std::chrono::steady_clock;

// A POST on a fresh connection, read until the server closes it.
std::string PostAndReadToClose(int port, const std::string& path, const std::string& body) {
  return ExchangeToClose(port, StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                                      "\r\nConnection: close\r\n\r\n", body),
                         false, 120000);
}

TEST(HardeningShutdown, EveryAnswerEndsProperlyAfterTheGrace) {
  ServeProcess server({"--graceful-shutdown-timeout", "2", "--disable-radix-cache"});
  const int port = server.port();
  // Far more tokens than two seconds give the demo model.
  const std::string stream = R"({"prompt":"Hi","max_tokens":1500,"ignore_eos":true,"stream":true})";
  const std::string plain = R"({"text":"Hello","sampling_params":{"max_new_tokens":1500,"ignore_eos":true}})";
  std::string stream_reply, plain_reply, short_reply;
  std::thread a([&] { stream_reply = PostAndReadToClose(port, "/v1/completions", stream); });
  std::thread b([&] { plain_reply = PostAndReadToClose(port, "/generate", plain); });
  for (int i = 0; i < 500 && MetricValue(Get(port, "/metrics").body, "sglang:num_running_reqs") < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // A short request started now finishes within the grace, untouched.
  std::thread c([&] {
    short_reply = PostAndReadToClose(port, "/v1/completions", R"({"prompt":"Yo","max_tokens":1,"stream":true})");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto signalled = Clock::now();
  server.Terminate();
  a.join();
  b.join();
  c.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - signalled).count();
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_GT(seconds, 1.9) << "the grace is two seconds";
  EXPECT_LT(seconds, 6.0) << "cancelled requests answer within a step or two, not after the last wait";

  EXPECT_NE(stream_reply.find("\"code\":503"), std::string::npos) << stream_reply.substr(stream_reply.size() - 600);
  EXPECT_NE(stream_reply.find("the server is shutting down"), std::string::npos);
  EXPECT_NE(stream_reply.find("data: [DONE]"), std::string::npos);
  ASSERT_GE(stream_reply.size(), 5u);
  EXPECT_EQ(stream_reply.substr(stream_reply.size() - 5), "0\r\n\r\n") << "the chunked body is terminated";

  EXPECT_EQ(plain_reply.rfind("HTTP/1.1 503", 0), 0u) << plain_reply.substr(0, 300);
  EXPECT_NE(plain_reply.find("the server is shutting down"), std::string::npos) << plain_reply;

  EXPECT_NE(short_reply.find("\"finish_reason\":\"length\""), std::string::npos) << short_reply;
  EXPECT_NE(short_reply.find("data: [DONE]"), std::string::npos) << short_reply;
  EXPECT_EQ(short_reply.find("shutting down"), std::string::npos) << short_reply;
}

}  // namespace
}  // namespace fission::server
