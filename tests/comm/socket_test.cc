// Address parsing and connection set-up of the multi-node bootstrap.
#include "comm/socket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "base/error.h"

namespace fission::comm {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(const std::string& value) {
  try {
    ParseHostPort(value, "--dist-init-addr");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseHostPort, AcceptsHostsAndBracketedIpv6) {
  HostPort a = ParseHostPort("10.0.0.1:5000", "--dist-init-addr");
  EXPECT_EQ(a.host, "10.0.0.1");
  EXPECT_EQ(a.port, 5000);
  a = ParseHostPort("node-a.example:65535", "--dist-init-addr");
  EXPECT_EQ(a.host, "node-a.example");
  EXPECT_EQ(a.port, 65535);
  a = ParseHostPort("[::1]:80", "--dist-init-addr");
  EXPECT_EQ(a.host, "::1");
  EXPECT_EQ(a.ToString(), "[::1]:80");
  EXPECT_EQ(ParseHostPort("h:0", "--x", /*allow_zero=*/true).port, 0);
}

TEST(ParseHostPort, BadAddressesNameTheFlag) {
  EXPECT_THAT(ErrorOf("10.0.0.1"), HasSubstr("--dist-init-addr '10.0.0.1' has no port"));
  EXPECT_THAT(ErrorOf("host:70000"), HasSubstr("outside [1, 65535]"));
  EXPECT_THAT(ErrorOf("host:0"), HasSubstr("outside [1, 65535]"));
  EXPECT_THAT(ErrorOf("host:http"), HasSubstr("is not a number"));
  EXPECT_THAT(ErrorOf("host:"), HasSubstr("is not a number"));
  EXPECT_THAT(ErrorOf("host:-5"), HasSubstr("is not a number"));
  EXPECT_THAT(ErrorOf(":5000"), HasSubstr("has no host"));
  EXPECT_THAT(ErrorOf("::1:5000"), HasSubstr("IPv6 host in brackets"));
  for (const std::string bad : {"10.0.0.1", "host:70000", ":1"}) EXPECT_THAT(ErrorOf(bad), HasSubstr("--dist-init-addr"));
}

// A port nobody listens on: bound and closed again.
int UnusedPort() {
  Socket s = Listen({"127.0.0.1", 0}, "test");
  return s.LocalAddress().port;
}

TEST(Connect, TimesOutWhenNobodyListens) {
  const HostPort address{"127.0.0.1", UnusedPort()};
  const auto start = std::chrono::steady_clock::now();
  try {
    Connect(address, 0.3, "--dist-init-addr");
    FAIL() << "connected to a port nobody listens on";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--dist-init-addr 127.0.0.1:"));
    EXPECT_THAT(e.what(), HasSubstr("could not connect within 0.3 s"));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(seconds, 0.3);
  EXPECT_LT(seconds, 5.0);
}

TEST(Connect, RetriesUntilTheListenerAppears) {
  const int port = UnusedPort();
  std::thread late([port] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Socket listener = Listen({"127.0.0.1", port}, "test");
    Socket peer = Accept(listener, 5, "test");
    peer.SendFrame(7, "hello");
  });
  Socket s = Connect({"127.0.0.1", port}, 5, "test");
  const auto frame = s.RecvFrame();
  late.join();
  ASSERT_TRUE(frame.has_value());
  EXPECT_EQ(frame->type, 7);
  EXPECT_EQ(frame->payload, "hello");
  EXPECT_FALSE(s.RecvFrame().has_value());  // closed cleanly
}

TEST(Accept, TimesOut) {
  Socket listener = Listen({"127.0.0.1", 0}, "test");
  EXPECT_THROW(Accept(listener, 0.2, "test"), Error);
}

TEST(Frames, OversizedFrameIsAnError) {
  Socket listener = Listen({"127.0.0.1", 0}, "test");
  Socket client = Connect(listener.LocalAddress(), 5, "test");
  Socket server = Accept(listener, 5, "test");
  client.SendFrame(1, std::string(100, 'x'));
  EXPECT_THROW(server.RecvFrame(10), Error);
}

}  // namespace
}  // namespace fission::comm
