// Where the server listens: --host as SGLang recipes pass it, checked before anything loads, and
// routes that take the rest of the path.
#include "http/listen_address.h"

#include <gtest/gtest.h>

#include "common/error_message.h"
#include "base/error.h"
#include "http/client.h"
#include "http/server.h"

namespace fission::http {
namespace {

std::string ErrorOf(const std::function<void()>& f) { return testing_util::ErrorMessageOf(f); }

TEST(ListenAddress, NamesAndLiteralsResolve) {
  EXPECT_EQ(ResolveListenAddress("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(ResolveListenAddress("0.0.0.0"), "0.0.0.0");
  EXPECT_EQ(ResolveListenAddress("::"), "::");
  EXPECT_EQ(ResolveListenAddress("localhost"), "127.0.0.1") << "IPv4 first, as a recipe's clients expect";
  const std::string e = ErrorOf([] { ResolveListenAddress("no-such-host.invalid"); });
  EXPECT_NE(e.find("--host 'no-such-host.invalid'"), std::string::npos) << e;
}

TEST(ListenAddress, ATakenPortIsReportedBeforeStarting) {
  HttpServer holder(ServerOptions{.host = "127.0.0.1", .port = 0});
  holder.Start();
  const std::string e = ErrorOf([&] { CheckCanListen("127.0.0.1", holder.port()); });
  EXPECT_NE(e.find("cannot listen on 127.0.0.1:" + std::to_string(holder.port())), std::string::npos) << e;
  EXPECT_EQ(ErrorOf([] { CheckCanListen("localhost", 0); }), "");
}

TEST(ListenAddress, ServerStartsOnAHostName) {
  HttpServer server(ServerOptions{.host = "localhost", .port = 0});
  server.AddRoute("GET", "/v1/models/*", [](const Request& req, std::shared_ptr<Responder> r) {
    r->Send(200, "text/plain", req.path);
  });
  server.AddRoute("GET", "/v1/models", [](const Request&, std::shared_ptr<Responder> r) { r->Send(200, "text/plain", "list"); });
  server.Start();
  HttpClient client;
  const Url url = Url::Parse("http://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_EQ(client.Fetch(ClientRequest::Get(url, "/v1/models")).body, "list");
  EXPECT_EQ(client.Fetch(ClientRequest::Get(url, "/v1/models/deepseek-ai/DeepSeek-V3")).body,
            "/v1/models/deepseek-ai/DeepSeek-V3");
  EXPECT_EQ(client.Fetch(ClientRequest::Get(url, "/v1/models/")).status, 404) << "the prefix alone is no match";
}

}  // namespace
}  // namespace fission::http
