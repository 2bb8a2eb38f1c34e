// The server against curl, an independent HTTP client.
#include <gtest/gtest.h>

#include <cstdio>
#include <thread>

#include "http/server.h"

namespace fission::http {
namespace {

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

class CurlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("curl --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl not installed";
    server_.AddRoute("POST", "/size", [](const Request& req, std::shared_ptr<Responder> r) {
      r->Send(200, "text/plain", std::to_string(req.body.size()));
    });
    server_.AddRoute("GET", "/stream", [](const Request&, std::shared_ptr<Responder> r) {
      r->StartStream(200, "text/event-stream");
      std::thread([r] {
        for (int i = 0; i < 3; ++i) r->Write("data: " + std::to_string(i) + "\n\n");
        r->Write("data: [DONE]\n\n");
        r->Finish();
      }).detach();
    });
    server_.Start();
    base_ = "http://127.0.0.1:" + std::to_string(server_.port());
  }
  HttpServer server_{ServerOptions{}};
  std::string base_;
};

TEST_F(CurlTest, StreamsChunkedSse) {
  EXPECT_EQ(RunCommand("curl -sN --max-time 10 " + base_ + "/stream"),
            "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n");
}

TEST_F(CurlTest, LargeBodyWithExpectContinue) {
  // curl sends "Expect: 100-continue" for large bodies and waits for the interim answer.
  const std::string file = ::testing::TempDir() + "/fission_curl_body.bin";
  FILE* f = std::fopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::string body(3 << 20, 'x');
  std::fwrite(body.data(), 1, body.size(), f);
  std::fclose(f);
  EXPECT_EQ(RunCommand("curl -s --max-time 10 -H 'Expect: 100-continue' --data-binary @" + file + " " + base_ + "/size"),
            std::to_string(body.size()));
}

TEST_F(CurlTest, KeepAliveAcrossRequestsAndStatusCodes) {
  // Two URLs in one curl run share the connection ("Re-using existing connection").
  const std::string out =
      RunCommand("curl -sv --max-time 10 -o /dev/null -o /dev/null " + base_ + "/stream " + base_ + "/missing 2>&1");
  EXPECT_NE(out.find("< HTTP/1.1 200 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("< HTTP/1.1 404 Not Found"), std::string::npos) << out;
  EXPECT_NE(out.find("e-using existing connection"), std::string::npos) << out;
}

}  // namespace
}  // namespace fission::http
