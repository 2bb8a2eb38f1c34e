#include "server/text_scan.h"

#include <gtest/gtest.h>

#include "server/tool_call_parser.h"

namespace fission::server {
namespace {

TEST(TextScanTest, PartialTagSuffixHoldsOnlyProperPrefixes) {
  EXPECT_EQ(PartialTagSuffix("abc</th", {"</think>"}), 4u);
  EXPECT_EQ(PartialTagSuffix("abc<", {"</think>", "<tool_call>"}), 1u);
  EXPECT_EQ(PartialTagSuffix("abc</think>", {"</think>"}), 0u);  // a whole tag is not held
  EXPECT_EQ(PartialTagSuffix("abc", {"</think>"}), 0u);
  EXPECT_EQ(PartialTagSuffix("", {"</think>"}), 0u);
  EXPECT_EQ(PartialTagSuffix("x<tool_", {"</think>", "<tool_call>"}), 6u);
  EXPECT_EQ(PartialTagSuffix("\n``", {"\n```"}), 3u);
}

TEST(TextScanTest, FindFirstOfPicksTheEarliest) {
  std::size_t which = 9;
  EXPECT_EQ(FindFirstOf("ab</x><y>", {"<y>", "</x>"}, 0, &which), 2u);
  EXPECT_EQ(which, 1u);
  EXPECT_EQ(FindFirstOf("ab", {"<y>"}, 0, &which), std::string_view::npos);
  EXPECT_EQ(FindFirstOf("<y><y>", {"<y>"}, 1, &which), 3u);
}

TEST(TextScanTest, Whitespace) {
  EXPECT_EQ(LeadingSpace(" \n\tx "), 3u);
  EXPECT_EQ(TrailingSpace(" x \r\n"), 3u);
  EXPECT_EQ(TrimSpace("  a b \n"), "a b");
  EXPECT_EQ(TrimSpace("   "), "");
}

TEST(ConvertArgumentValueTest, FollowsTheSchema) {
  const Json str = Json::parse(R"({"type": "string"})");
  const Json num = Json::parse(R"({"type": "integer"})");
  const Json boolean = Json::parse(R"({"type": "boolean"})");
  const Json obj = Json::parse(R"({"type": "object", "properties": {}})");
  const Json either = Json::parse(R"({"type": ["number", "string"]})");
  const Json choice = Json::parse(R"({"enum": ["a", "b"]})");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("007", &str)), "\"007\"");
  EXPECT_EQ(DumpJson(ConvertArgumentValue(" 7 ", &num)), "7");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("seven", &num)), "\"seven\"");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("false", &boolean)), "false");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("True", &boolean)), "true");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("{\"b\": 1, \"a\": [2]}", &obj)), "{\"b\":1,\"a\":[2]}");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("[1]", &obj)), "\"[1]\"");  // an array is not an object
  EXPECT_EQ(DumpJson(ConvertArgumentValue("2.5", &either)), "2.5");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("hi", &either)), "\"hi\"");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("1", &choice)), "\"1\"");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("null", nullptr)), "null");
  EXPECT_EQ(DumpJson(ConvertArgumentValue("plain words", nullptr)), "\"plain words\"");
  // Invalid UTF-8 is replaced, not thrown on.
  EXPECT_EQ(DumpJson(ConvertArgumentValue("a\xff", &str)), "\"a\xef\xbf\xbd\"");
}

}  // namespace
}  // namespace fission::server
