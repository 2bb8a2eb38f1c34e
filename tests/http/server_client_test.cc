// The HTTP server and client against each other on loopback.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "base/json.h"
#include "http/client.h"
#include "http/request_parser.h"
#include "http/server.h"

namespace fission::http {
namespace {

using namespace std::chrono_literals;

Url Loopback(const HttpServer& server) { return Url::Parse("http://127.0.0.1:" + std::to_string(server.port())); }

// Sends raw bytes on a fresh socket and returns everything the server answers until it closes.
std::string RawExchange(int port, const std::string& bytes) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::socket socket(ioc);
  socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  boost::asio::write(socket, boost::asio::buffer(bytes));
  std::string out;
  char buf[4096];
  boost::system::error_code ec;
  for (;;) {
    size_t n = socket.read_some(boost::asio::buffer(buf), ec);
    if (ec) break;
    out.append(buf, n);
  }
  return out;
}

class ServerClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddRoute("GET", "/health", [](const Request&, std::shared_ptr<Responder> r) {
      r->Send(200, "text/plain", "ok");
    });
    server_.AddRoute("POST", "/echo", [](const Request& req, std::shared_ptr<Responder> r) {
      Json j = ParseJson(req.body, "echo body");
      const std::string* custom = req.FindHeader("x-custom");
      j["header"] = custom ? *custom : "";
      j["query"] = req.query;
      r->Send(200, "application/json", j.dump(), {{"X-Reply", "1"}});
    });
    server_.AddRoute("POST", "/throws", [](const Request& req, std::shared_ptr<Responder>) {
      ParseJson(req.body, "request body");  // malformed -> fission::Error -> 400
    });
    server_.AddRoute("GET", "/silent", [](const Request&, std::shared_ptr<Responder>) {});
    server_.Start();
  }
  HttpServer server_{ServerOptions{.io_threads = 2}};
  HttpClient client_;
};

TEST_F(ServerClientTest, GetAndRoutingErrors) {
  ClientResponse r = client_.Fetch(ClientRequest::Get(Loopback(server_), "/health"));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_EQ(client_.Fetch(ClientRequest::Get(Loopback(server_), "/nope")).status, 404);
  ClientResponse wrong_method = client_.Fetch(ClientRequest::Post(Loopback(server_), "/health", "{}"));
  EXPECT_EQ(wrong_method.status, 405);
  ASSERT_NE(FindHeader(wrong_method.headers, "allow"), nullptr);
  EXPECT_EQ(*FindHeader(wrong_method.headers, "Allow"), "GET, HEAD");
}

TEST_F(ServerClientTest, PostJsonHeadersQueryAndKeepAlive) {
  for (int i = 0; i < 20; ++i) {
    ClientRequest req = ClientRequest::Post(Loopback(server_), "/echo?i=" + std::to_string(i), Json{{"i", i}}.dump());
    req.headers.push_back({"X-Custom", "v" + std::to_string(i)});
    ClientResponse r = client_.Fetch(req);
    ASSERT_EQ(r.status, 200) << r.error;
    Json j = ParseJson(r.body, "reply");
    EXPECT_EQ(j["i"], i);
    EXPECT_EQ(j["header"], "v" + std::to_string(i));
    EXPECT_EQ(j["query"], "i=" + std::to_string(i));
    EXPECT_EQ(*FindHeader(r.headers, "x-reply"), "1");
  }
  // Sequential requests reuse one keep-alive connection.
  EXPECT_EQ(client_.connections_opened(), 1u);
}

TEST_F(ServerClientTest, HandlerErrorsBecomeStatusCodes) {
  ClientResponse bad = client_.Fetch(ClientRequest::Post(Loopback(server_), "/throws", "{not json"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("invalid JSON"), std::string::npos);
  // A handler that drops its responder without answering yields 500, and the connection lives on.
  EXPECT_EQ(client_.Fetch(ClientRequest::Get(Loopback(server_), "/silent")).status, 500);
  EXPECT_EQ(client_.Fetch(ClientRequest::Get(Loopback(server_), "/health")).status, 200);
}

TEST_F(ServerClientTest, MalformedRequestGets400AndClose) {
  const std::string reply = RawExchange(server_.port(), "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 400");
  EXPECT_NE(reply.find("Connection: close"), std::string::npos);
  const std::string chunked_garbage =
      RawExchange(server_.port(), "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
  EXPECT_EQ(chunked_garbage.substr(0, 12), "HTTP/1.1 400");
}

TEST(ServerStreamTest, ChunksArriveOneByOneWhileTheHandlerWrites) {
  // The handler writes chunk i+1 only after the client has received chunk i: the test would hang
  // (and fail by deadline) if the client or server buffered the stream.
  std::mutex mu;
  std::condition_variable cv;
  int received = 0;
  HttpServer server(ServerOptions{});
  std::thread producer;
  server.AddRoute("POST", "/stream", [&](const Request&, std::shared_ptr<Responder> r) {
    r->StartStream(200, "text/event-stream");
    producer = std::thread([&, r] {
      for (int i = 0; i < 5; ++i) {
        r->Write("data: " + std::to_string(i) + "\n\n");
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, 10s, [&] { return received > i; })) break;
      }
      r->Write("data: [DONE]\n\n");
      r->Finish();
    });
  });
  server.Start();
  HttpClient client;
  std::promise<std::string> done;
  std::vector<std::string> pieces;
  std::vector<Clock::time_point> stamps;
  int status = 0;
  ResponseHandlers h;
  h.on_headers = [&](int s, const std::vector<Header>& headers, Clock::time_point) {
    status = s;
    EXPECT_EQ(*FindHeader(headers, "content-type"), "text/event-stream");
  };
  h.on_data = [&](std::string_view data, Clock::time_point t) {
    pieces.emplace_back(data);
    stamps.push_back(t);
    std::lock_guard lock(mu);
    ++received;
    cv.notify_all();
  };
  h.on_complete = [&](const std::string& error, Clock::time_point) { done.set_value(error); };
  client.Start(ClientRequest::Post(Loopback(server), "/stream", "{}"), h);
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(20s), std::future_status::ready);
  EXPECT_EQ(future.get(), "");
  producer.join();
  EXPECT_EQ(status, 200);
  ASSERT_GE(pieces.size(), 6u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(pieces[i], "data: " + std::to_string(i) + "\n\n");
  for (size_t i = 1; i < stamps.size(); ++i) EXPECT_LE(stamps[i - 1], stamps[i]);
}

TEST(ServerStreamTest, ClientDisconnectIsReported) {
  std::promise<void> disconnected;
  std::shared_ptr<Responder> held;
  std::promise<void> started;
  HttpServer server(ServerOptions{});
  server.AddRoute("POST", "/stream", [&](const Request&, std::shared_ptr<Responder> r) {
    r->StartStream(200, "text/event-stream");
    r->Write("data: first\n\n");
    r->OnDisconnect([&] { disconnected.set_value(); });
    held = r;
    started.set_value();
  });
  server.Start();
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
    const std::string req = "POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}";
    boost::asio::write(socket, boost::asio::buffer(req));
    ASSERT_EQ(started.get_future().wait_for(10s), std::future_status::ready);
    socket.close();
  }
  ASSERT_EQ(disconnected.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(held->disconnected());
  held->Write("data: dropped\n\n");  // harmless after the disconnect
  held->Finish();
}

TEST(ServerStreamTest, ManyConcurrentStreamsOnFewThreads) {
  constexpr int kRequests = 300;
  constexpr int kChunks = 8;
  HttpServer server(ServerOptions{.io_threads = 2});
  std::vector<std::thread> producers;
  std::mutex producers_mu;
  server.AddRoute("POST", "/stream", [&](const Request& req, std::shared_ptr<Responder> r) {
    const int id = static_cast<int>(ParseJson(req.body, "body")["id"]);
    r->StartStream(200, "text/event-stream");
    for (int c = 0; c < kChunks; ++c) r->Write("data: " + std::to_string(id * 100 + c) + "\n\n");
    r->Finish();
  });
  server.Start();
  HttpClient client;
  std::mutex mu;
  std::condition_variable cv;
  int completed = 0;
  std::vector<std::string> bodies(kRequests);
  std::vector<std::string> errors(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    ResponseHandlers h;
    h.on_data = [&, i](std::string_view data, Clock::time_point) { bodies[i].append(data); };
    h.on_complete = [&, i](const std::string& error, Clock::time_point) {
      std::lock_guard lock(mu);
      errors[i] = error;
      ++completed;
      cv.notify_all();
    };
    client.Start(ClientRequest::Post(Loopback(server), "/stream", Json{{"id", i}}.dump()), h);
  }
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return completed == kRequests; }));
  for (int i = 0; i < kRequests; ++i) {
    std::string expected;
    for (int c = 0; c < kChunks; ++c) expected += "data: " + std::to_string(i * 100 + c) + "\n\n";
    EXPECT_EQ(errors[i], "");
    EXPECT_EQ(bodies[i], expected);
  }
  // Concurrent requests need concurrent connections; they are pooled, not one per request forever.
  EXPECT_LE(client.connections_opened(), static_cast<size_t>(kRequests));
  EXPECT_LE(server.open_connections(), static_cast<size_t>(kRequests));
}

TEST(ServerStopTest, GracefulStopLetsTheInFlightStreamFinish) {
  std::shared_ptr<Responder> held;
  std::promise<void> started;
  auto server = std::make_unique<HttpServer>(ServerOptions{});
  server->AddRoute("POST", "/stream", [&](const Request&, std::shared_ptr<Responder> r) {
    r->StartStream(200, "text/event-stream");
    r->Write("data: a\n\n");
    held = r;
    started.set_value();
  });
  server->Start();
  const Url url = Loopback(*server);
  HttpClient client;
  std::promise<std::string> done;
  std::string body;
  ResponseHandlers h;
  h.on_data = [&](std::string_view d, Clock::time_point) { body.append(d); };
  h.on_complete = [&](const std::string& e, Clock::time_point) { done.set_value(e); };
  client.Start(ClientRequest::Post(url, "/stream", "{}"), h);
  ASSERT_EQ(started.get_future().wait_for(10s), std::future_status::ready);
  std::thread stopper([&] { server->Stop(10s); });
  std::this_thread::sleep_for(50ms);  // let Stop() close the acceptor first
  held->Write("data: b\n\n");
  held->Finish();
  held.reset();
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(f.get(), "");
  EXPECT_EQ(body, "data: a\n\ndata: b\n\n");
  stopper.join();
  // No longer accepting.
  ClientResponse after = client.Fetch(ClientRequest::Get(url, "/stream"));
  EXPECT_NE(after.error, "");
}

TEST(ClientTest, ConnectionRefusedIsAnError) {
  int port = 0;
  {
    HttpServer s(ServerOptions{});
    s.Start();
    port = s.port();
  }
  HttpClient client;
  ClientResponse r = client.Fetch(ClientRequest::Get(Url::Parse("http://127.0.0.1:" + std::to_string(port)), "/"));
  EXPECT_NE(r.error.find("cannot connect"), std::string::npos) << r.error;
}

TEST(ClientTest, ServerClosingAnIdleConnectionIsRetriedTransparently) {
  HttpServer server(ServerOptions{.idle_timeout = 100ms});
  server.AddRoute("GET", "/x", [](const Request&, std::shared_ptr<Responder> r) { r->Send(200, "text/plain", "x"); });
  server.Start();
  HttpClient client;
  EXPECT_EQ(client.Fetch(ClientRequest::Get(Loopback(server), "/x")).status, 200);
  // Wait until the server has dropped the idle pooled connection.
  for (int i = 0; i < 200 && server.open_connections() > 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(server.open_connections(), 0u);
  ClientResponse r = client.Fetch(ClientRequest::Get(Loopback(server), "/x"));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(client.connections_opened(), 2u);
}

}  // namespace
}  // namespace fission::http

namespace fission::http {
namespace {

TEST(ServerRobustnessTest, GarbageRequestsGetOnly4xxAndTheServerStaysUp) {
  HttpServer server(ServerOptions{.max_body_bytes = 1 << 16});
  server.AddRoute("POST", "/x", [](const Request& req, std::shared_ptr<Responder> r) {
    r->Send(200, "text/plain", std::to_string(req.body.size()));
  });
  server.Start();
  std::mt19937 rng(123);
  const std::vector<std::string> templates = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
      "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
  };
  for (int i = 0; i < 300; ++i) {
    std::string req = templates[i % templates.size()];
    // Corrupt a few bytes (or none, for the first round of each template).
    const int flips = i < 4 ? 0 : 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) req[rng() % req.size()] = static_cast<char>(rng() % 256);
    const std::string reply = RawExchange(server.port(), req + "\r\n\r\n");
    if (reply.empty()) continue;  // a request the server is still waiting to complete is closed by us
    ASSERT_EQ(reply.substr(0, 9), "HTTP/1.1 ") << i;
    const int status = std::stoi(reply.substr(9, 3));
    EXPECT_TRUE(status == 200 || (status >= 400 && status < 500)) << i << ": " << reply.substr(0, 40);
  }
  HttpClient client;
  EXPECT_EQ(client.Fetch(ClientRequest::Post(Loopback(server), "/x", "abc")).body, "3");
}

TEST(ServerRobustnessTest, ThousandIdleKeepAliveConnectionsWhileRequestsSucceed) {
  HttpServer server(ServerOptions{.io_threads = 2});
  server.AddRoute("GET", "/x", [](const Request&, std::shared_ptr<Responder> r) { r->Send(200, "text/plain", "x"); });
  server.Start();
  boost::asio::io_context ioc;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::socket>> idle;
  for (int i = 0; i < 1000; ++i) {
    auto s = std::make_unique<boost::asio::ip::tcp::socket>(ioc);
    s->connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
    idle.push_back(std::move(s));
  }
  for (int i = 0; i < 200 && server.open_connections() < 1000; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server.open_connections(), 1000u);
  HttpClient client;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(client.Fetch(ClientRequest::Get(Loopback(server), "/x")).status, 200);
  // An idle connection still answers.
  const std::string req = "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  boost::asio::write(*idle[500], boost::asio::buffer(req));
  std::string reply;
  char buf[512];
  boost::system::error_code ec;
  while (!ec) {
    const size_t n = idle[500]->read_some(boost::asio::buffer(buf), ec);
    reply.append(buf, n);
  }
  EXPECT_EQ(reply.substr(0, 15), "HTTP/1.1 200 OK");
}

}  // namespace
}  // namespace fission::http

namespace fission::http {
namespace {

TEST(ClientTest, DeadlineEndsAStalledResponse) {
  std::shared_ptr<Responder> held;
  HttpServer server(ServerOptions{});
  server.AddRoute("GET", "/stall", [&](const Request&, std::shared_ptr<Responder> r) {
    r->StartStream(200, "text/event-stream");
    r->Write("data: first\n\n");
    held = r;  // never finished while the client waits
  });
  server.Start();
  HttpClient client;
  ClientRequest req = ClientRequest::Get(Loopback(server), "/stall");
  req.timeout = 200ms;
  const ClientResponse r = client.Fetch(req);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "data: first\n\n");
  EXPECT_EQ(r.error, "timed out");
}

}  // namespace
}  // namespace fission::http

namespace fission::http {
namespace {

// A server with one streaming route written from another thread, as the API's jobs do.
class ConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.AddRoute("GET", "/info", [](const Request&, std::shared_ptr<Responder> r) {
      r->Send(200, "application/json", R"({"ok":true})");
    });
    server_.AddRoute("POST", "/stream", [this](const Request&, std::shared_ptr<Responder> r) {
      r->StartStream(200, "text/event-stream", {{"Cache-Control", "no-store"}});
      writers_.emplace_back([r] {
        std::this_thread::sleep_for(20ms);  // the client may have half-closed by now
        for (int i = 0; i < 3; ++i) r->Write("data: " + std::to_string(i) + "\n\n");
        r->Finish();
      });
    });
    server_.AddRoute("POST", "/plain", [this](const Request& req, std::shared_ptr<Responder> r) {
      writers_.emplace_back([r, body = req.body] {
        std::this_thread::sleep_for(20ms);
        r->Send(200, "text/plain", "got " + body);
      });
    });
    server_.Start();
  }
  void TearDown() override {
    for (std::thread& t : writers_) t.join();
  }
  // Sends `bytes`, optionally half-closes, and reads until the server closes the connection.
  std::string Exchange(const std::string& bytes, bool half_close) {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket socket(ioc);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_.port())});
    boost::asio::write(socket, boost::asio::buffer(bytes));
    if (half_close) socket.shutdown(boost::asio::ip::tcp::socket::shutdown_send);
    std::string out;
    char buf[4096];
    boost::system::error_code ec;
    for (;;) {
      const size_t n = socket.read_some(boost::asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }
  HttpServer server_{ServerOptions{.io_threads = 2}};
  std::vector<std::thread> writers_;
};

TEST_F(ConformanceTest, HeadAnswersTheHeadersOfGet) {
  const std::string get = Exchange("GET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  const std::string head = Exchange("HEAD /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  EXPECT_EQ(head, get.substr(0, get.find("\r\n\r\n") + 4)) << "same headers, Content-Length included; no body";
  const std::string wrong = Exchange("HEAD /plain HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false);
  EXPECT_EQ(wrong.rfind("HTTP/1.1 405", 0), 0u) << wrong;
  EXPECT_EQ(wrong.substr(wrong.find("\r\n\r\n") + 4), "") << "a HEAD answer never has a body";
}

TEST_F(ConformanceTest, Http10StreamsAreNotChunkedAndEndWithTheConnection) {
  const std::string reply = Exchange("POST /stream HTTP/1.0\r\nContent-Length: 0\r\n\r\n", false);
  const std::string headers = reply.substr(0, reply.find("\r\n\r\n"));
  EXPECT_EQ(headers.find("Transfer-Encoding"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Connection: close"), std::string::npos) << headers;
  EXPECT_EQ(reply.substr(reply.find("\r\n\r\n") + 4), "data: 0\n\ndata: 1\n\ndata: 2\n\n");
  // HTTP/1.1 gets chunks, and the handler's Cache-Control is the only one.
  const std::string chunked = Exchange("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", true);
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked"), std::string::npos) << chunked;
  EXPECT_NE(chunked.find("Cache-Control: no-store"), std::string::npos) << chunked;
  EXPECT_EQ(chunked.find("no-cache"), std::string::npos) << chunked;
  EXPECT_EQ(chunked.substr(chunked.size() - 5), "0\r\n\r\n");
}

TEST_F(ConformanceTest, AHalfClosedClientStillGetsItsAnswer) {
  const std::string plain = Exchange("POST /plain HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", true);
  EXPECT_EQ(plain.rfind("HTTP/1.1 200", 0), 0u) << plain;
  EXPECT_NE(plain.find("Connection: close"), std::string::npos) << "no request can follow a half-close";
  EXPECT_EQ(plain.substr(plain.size() - 6), "got hi");
  const std::string stream = Exchange("POST /stream HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", true);
  EXPECT_NE(stream.find("data: 2"), std::string::npos) << stream;
}

TEST(RequestParserTest, CompleteIncompleteAndMalformedRequests) {
  const ParseResult ok = ParseRequest("POST /a?b=1 HTTP/1.0\r\nContent-Length: 2\r\nX-Y: z\r\n\r\nhi", 1024);
  ASSERT_EQ(ok.outcome, ParseResult::Outcome::kComplete);
  EXPECT_EQ(ok.request.path, "/a");
  EXPECT_EQ(ok.request.query, "b=1");
  EXPECT_EQ(ok.request.body, "hi");
  EXPECT_EQ(ok.request.version, 10);
  EXPECT_FALSE(ok.request.keep_alive);
  EXPECT_EQ(*ok.request.FindHeader("x-y"), "z");
  EXPECT_EQ(ParseRequest("POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhi", 1024).outcome,
            ParseResult::Outcome::kIncomplete);
  EXPECT_EQ(ParseRequest("GET / HTTP/1.1\r\nHost:", 1024).outcome, ParseResult::Outcome::kIncomplete);
  const ParseResult big = ParseRequest("POST /a HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", 1024);
  EXPECT_EQ(big.outcome, ParseResult::Outcome::kMalformed);
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(ParseRequest("GET / HTTP/1.1\r\nX: " + std::string(70000, 'h') + "\r\n\r\n", 1024).status, 431);
  EXPECT_EQ(ParseRequest("GARBAGE\r\n\r\n", 1024).status, 400);
  EXPECT_EQ(ParseRequest("POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n", 1024).status, 400);
}

}  // namespace
}  // namespace fission::http
