#include "http/url.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "http/sse.h"

namespace fission::http {
namespace {

TEST(UrlTest, ParsesHostPortAndPath) {
  Url u = Url::Parse("http://127.0.0.1:30000/v1/");
  EXPECT_EQ(u.host, "127.0.0.1");
  EXPECT_EQ(u.port, 30000);
  EXPECT_EQ(u.path, "/v1");
  EXPECT_EQ(u.Target("/completions"), "/v1/completions");
  EXPECT_EQ(u.ToString(), "http://127.0.0.1:30000/v1");
}

TEST(UrlTest, DefaultsPortAndEmptyPath) {
  Url u = Url::Parse("http://localhost");
  EXPECT_EQ(u.host, "localhost");
  EXPECT_EQ(u.port, 80);
  EXPECT_EQ(u.Target("/health"), "/health");
}

TEST(UrlTest, ParsesIpv6) {
  Url u = Url::Parse("http://[::1]:8000");
  EXPECT_EQ(u.host, "::1");
  EXPECT_EQ(u.port, 8000);
  EXPECT_EQ(u.ToString(), "http://[::1]:8000");
}

TEST(UrlTest, RejectsBadUrls) {
  for (const char* bad : {"https://x", "127.0.0.1:80", "http://", "http://h:0", "http://h:70000", "http://h:12a",
                          "http://h/x?y=1", "http://[::1"}) {
    EXPECT_THROW(Url::Parse(bad), Error) << bad;
  }
}

TEST(SseTest, SplitsLinesAcrossPiecesAndCrLf) {
  LineSplitter splitter;
  std::vector<std::string> lines;
  auto collect = [&](std::string_view line) { lines.emplace_back(line); };
  splitter.Feed("data: {\"a\"", collect);
  splitter.Feed(":1}\r\n\r\ndata: [DONE]\n", collect);
  splitter.Feed("\npartial", collect);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "data: {\"a\":1}");
  EXPECT_EQ(lines[1], "");
  EXPECT_EQ(lines[2], "data: [DONE]");
  EXPECT_EQ(lines[3], "");
  EXPECT_EQ(splitter.partial(), "partial");
  EXPECT_EQ(SseData("data: x").value(), "x");
  EXPECT_EQ(SseData("data:x").value(), "x");
  EXPECT_FALSE(SseData(": comment").has_value());
  EXPECT_FALSE(SseData("event: x").has_value());
}

}  // namespace
}  // namespace fission::http
