// The JSON reader's bounds (nesting, numbers), exact integers and short previews of values.
#include "base/json.h"

#include <gtest/gtest.h>

#include <limits>

namespace fission {
namespace {

std::string ErrorOf(const std::string& text) {
  try {
    ParseJson(text, "body");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonTest, NestingDeeperThanTheLimitIsRefusedBeforeParsing) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(ErrorOf(ok), "");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(ErrorOf(deep), "body: JSON nested deeper than 128 levels at byte 128");
  EXPECT_NE(ErrorOf("{\"a\":" + std::string(200, '{')).find("nested deeper"), std::string::npos);
  // Brackets inside strings, escaped quotes included, are text.
  const std::string text = "\"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"";
  EXPECT_EQ(ErrorOf(text), "");
  EXPECT_EQ(FindExcessNesting("[[\"[[[[\"]]", 2), std::string::npos);
  EXPECT_EQ(FindExcessNesting("[[[", 2), 2u);
  EXPECT_EQ(FindExcessNesting("{\"a\":[{}]}", 2), 6u);
  // The ordered reader has the same bound.
  EXPECT_THROW(ParseOrderedJson(deep, "body"), Error);
}

TEST(JsonTest, NumbersBeyondDoubleAreErrorsAndMessagesStayShort) {
  EXPECT_NE(ErrorOf("{\"t\": 1e400}").find("number overflow"), std::string::npos) << ErrorOf("{\"t\": 1e400}");
  EXPECT_NE(ErrorOf("[-1e400]").find("number overflow"), std::string::npos);
  // A long bad token is quoted by a prefix only.
  const std::string message = ErrorOf("\"" + std::string(1 << 20, 'x') + "\x01\"");
  EXPECT_NE(message.find("invalid JSON at byte"), std::string::npos) << message.substr(0, 300);
  EXPECT_LT(message.size(), 400u);
}

TEST(JsonTest, ExactInt64NeverTruncates) {
  EXPECT_EQ(ExactInt64(Json(5)), 5);
  EXPECT_EQ(ExactInt64(Json(-7)), -7);
  EXPECT_EQ(ExactInt64(Json(3.0)), 3);
  EXPECT_EQ(ExactInt64(Json(1e3)), 1000);
  EXPECT_EQ(ExactInt64(Json(std::numeric_limits<std::int64_t>::max())), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(ExactInt64(Json::parse("4294967297")), 4294967297);
  EXPECT_EQ(ExactInt64(Json(2.5)), std::nullopt);
  EXPECT_EQ(ExactInt64(Json::parse("18446744073709551615")), std::nullopt);  // uint64 max
  EXPECT_EQ(ExactInt64(Json(9.3e18)), std::nullopt);
  EXPECT_EQ(ExactInt64(Json(-9.3e18)), std::nullopt);
  EXPECT_EQ(ExactInt64(Json("5")), std::nullopt);
  EXPECT_EQ(ExactInt64(Json(true)), std::nullopt);
  EXPECT_EQ(ExactInt64(OrderedJson(12)), 12);
  // GetInt shares it.
  EXPECT_THROW(GetInt(Json{{"n", 2.5}}, "n", "cfg"), Error);
  EXPECT_THROW(GetInt(Json::parse(R"({"n": 18446744073709551615})"), "n", "cfg"), Error);
  EXPECT_EQ(GetInt(Json{{"n", 8.0}}, "n", "cfg"), 8);
}

TEST(JsonTest, PreviewsAndAbbreviationsAreShort) {
  EXPECT_EQ(JsonPreview(Json(1.5)), "1.5");
  EXPECT_EQ(JsonPreview(Json(nullptr)), "null");
  EXPECT_EQ(JsonPreview(Json("hot")), "'hot'");
  EXPECT_EQ(JsonPreview(Json::array({1, 2, 3})), "an array of 3 items");
  EXPECT_EQ(JsonPreview(Json{{"a", 1}}), "an object of 1 fields");
  const std::string preview = JsonPreview(Json(std::string(1 << 20, 'z')));
  EXPECT_EQ(preview, "'" + std::string(64, 'z') + "... (1048576 bytes)'");
  EXPECT_EQ(Abbreviate("short"), "short");
  // The cut never splits a character: 'é' is two bytes, and 64 falls inside one.
  std::string accents;
  for (int i = 0; i < 40; ++i) accents += "\xc3\xa9";
  EXPECT_EQ(Abbreviate(accents), accents.substr(0, 64) + "... (80 bytes)");
  EXPECT_EQ(Abbreviate("a" + accents), "a" + accents.substr(0, 62) + "... (81 bytes)");
}

}  // namespace
}  // namespace fission
