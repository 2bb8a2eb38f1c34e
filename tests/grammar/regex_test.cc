// Regexes compiled to automata: what they match, UTF-8 classes, JSON-string mode, and the errors
// for what is not regular.
#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/grammar_testlib.h"
#include "grammar/regex_parser.h"

namespace fission::grammar {
namespace {

using testing::Compile;
using testing::IsPrefix;
using testing::Matches;

std::shared_ptr<const CompiledGrammar> Regex(const std::string& pattern) { return Compile(RegexGrammar(pattern)); }

TEST(Regex, LiteralsAlternationAndQuantifiers) {
  const auto g = Regex("ab(c|de)*f?");
  for (const char* yes : {"ab", "abc", "abdef", "abcdecf", "abf"}) EXPECT_TRUE(Matches(g, yes)) << yes;
  for (const char* no : {"", "a", "abd", "abff", "xab"}) EXPECT_FALSE(Matches(g, no)) << no;
  EXPECT_TRUE(IsPrefix(g, "abd"));
  EXPECT_FALSE(IsPrefix(g, "abx"));
}

TEST(Regex, CountedRepetition) {
  const auto g = Regex("x{2,4}y{3}z{1,}");
  EXPECT_TRUE(Matches(g, "xxyyyz"));
  EXPECT_TRUE(Matches(g, "xxxxyyyzzz"));
  EXPECT_FALSE(Matches(g, "xyyyz"));
  EXPECT_FALSE(Matches(g, "xxxxxyyyz"));
  EXPECT_FALSE(Matches(g, "xxyyz"));
  EXPECT_TRUE(Matches(Regex("a{3}"), "aaa"));
  EXPECT_TRUE(Matches(Regex("a{0}b"), "b"));
  EXPECT_TRUE(Matches(Regex("a{,2}"), "a{,2}")) << "not a quantifier: literal braces";
}

TEST(Regex, ClassesAndEscapes) {
  const auto g = Regex(R"([a-c\d_-]+\.\s\x41\u00e9\n)");
  EXPECT_TRUE(Matches(g, "ab9_-. A\xC3\xA9\n"));
  EXPECT_FALSE(Matches(g, "ad. A\xC3\xA9\n"));
  EXPECT_TRUE(Matches(Regex(R"(\w+\W\D)"), "ab_1!x"));
  EXPECT_TRUE(Matches(Regex("[^a-z]"), "\xE2\x82\xAC")) << "a negated class holds multi-byte characters";
  EXPECT_FALSE(Matches(Regex("[^a-z]"), "q"));
  EXPECT_TRUE(Matches(Regex("[]a]"), "]"));
}

TEST(Regex, DotIsAnyCharacterButLineTerminators) {
  const auto g = Regex("a.c");
  EXPECT_TRUE(Matches(g, "abc"));
  EXPECT_TRUE(Matches(g, "a\xF0\x9F\x98\x80" "c")) << "one four-byte character";
  EXPECT_FALSE(Matches(g, "a\nc"));
  EXPECT_FALSE(Matches(g, "a\xF0\x9F\x98" "c")) << "an incomplete character";
  EXPECT_TRUE(IsPrefix(g, "a\xF0\x9F")) << "a valid prefix of a character";
  EXPECT_FALSE(IsPrefix(g, "a\x80")) << "a continuation byte cannot start a character";
}

TEST(Regex, UnicodeRanges) {
  const auto g = Regex("[\xCE\xB1-\xCF\x89]+");  // Greek small letters, two bytes each
  EXPECT_TRUE(Matches(g, "\xCE\xB1\xCE\xB2\xCF\x89"));
  EXPECT_FALSE(Matches(g, "a"));
  const auto wide = Regex(R"([\u0100-\u{10FFFF}])");
  EXPECT_TRUE(Matches(wide, "\xC4\x80"));
  EXPECT_TRUE(Matches(wide, "\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(Matches(wide, "\xED\xA0\x80")) << "surrogates are not characters";
}

TEST(Regex, AnchorsAtTheEndsMeanNothingMore) {
  EXPECT_TRUE(Matches(Regex("^ab$"), "ab"));
  EXPECT_TRUE(Matches(Regex("^a|b$"), "b"));
  EXPECT_THROW(Regex("a^b"), Error);
  EXPECT_THROW(Regex("a$b"), Error);
}

TEST(Regex, JsonStringModeEscapes) {
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  RegexOptions options;
  options.json_string = true;
  g.Define(root, ParseRegex("a\"b\\\\c[\\n\\t]", &g, options));
  g.set_root(root);
  const auto c = Compile(g);
  EXPECT_TRUE(Matches(c, "a\\\"b\\\\c\\n"));
  EXPECT_TRUE(Matches(c, "a\\\"b\\\\c\\t"));
  EXPECT_FALSE(Matches(c, "a\"b\\c\n")) << "raw quote, backslash and newline are not JSON string text";
}

TEST(Regex, UnsupportedConstructsAreNamed) {
  auto message = [](const std::string& pattern) {
    try {
      RegexGrammar(pattern);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(message("a(?=b)").find("lookahead"), std::string::npos);
  EXPECT_NE(message("(?<=a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(message("\\bword").find("word boundaries"), std::string::npos);
  EXPECT_NE(message("(?i)a").find("flags"), std::string::npos);
  EXPECT_NE(message("\\p{L}").find("Unicode property"), std::string::npos);
  EXPECT_NE(message("(ab").find("unterminated group"), std::string::npos);
  EXPECT_NE(message("ab)").find("unmatched ')'"), std::string::npos);
  EXPECT_NE(message("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(message("a{3,2}").find("m < n"), std::string::npos);
  EXPECT_NE(message("[z-a]").find("out of order"), std::string::npos);
  EXPECT_NE(message("ab\\").find("offset 2"), std::string::npos) << message("ab\\");
}

TEST(Regex, LazyQuantifiersMatchTheSameLanguage) {
  EXPECT_TRUE(Matches(Regex("a+?b*?"), "aab"));
}

}  // namespace
}  // namespace fission::grammar
