// EBNF grammars: rules spanning lines, recursion (left recursion too), classes, repetitions, and
// errors that name the line and column.
#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/ebnf_parser.h"
#include "grammar/grammar_testlib.h"

namespace fission::grammar {
namespace {

using testing::Compile;
using testing::IsPrefix;
using testing::Matches;

std::shared_ptr<const CompiledGrammar> Ebnf(const std::string& text) { return Compile(ParseEbnf(text)); }

std::string ErrorOf(const std::string& text) {
  try {
    ParseEbnf(text);
    Compile(ParseEbnf(text));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Ebnf, ArithmeticWithRecursion) {
  const auto g = Ebnf(R"G(
    # expressions with parentheses
    root   ::= expr
    expr   ::= term (("+" | "-") term)*
    term   ::= factor (("*" | "/") factor)*
    factor ::= [0-9]+ | "(" expr ")"
  )G");
  for (const char* yes : {"1", "1+2*3", "(1+2)*3", "((4))", "12/(3-1)"}) EXPECT_TRUE(Matches(g, yes)) << yes;
  for (const char* no : {"", "1+", "(1", "1)", "+1", "()"}) EXPECT_FALSE(Matches(g, no)) << no;
  EXPECT_TRUE(IsPrefix(g, "((1+"));
}

TEST(Ebnf, LeftRecursionAndNullableRules) {
  const auto g = Ebnf(R"(
    root ::= list
    list ::= list "," item | item
    item ::= opt "x" opt
    opt  ::= "" | "-"
  )");
  EXPECT_TRUE(Matches(g, "x"));
  EXPECT_TRUE(Matches(g, "-x-,x,x-"));
  EXPECT_FALSE(Matches(g, "x,"));
  EXPECT_FALSE(Matches(g, "--x"));
  const auto empty_start = Ebnf("root ::= a b\na ::= \"\" | \"a\"\nb ::= a \"b\"");
  EXPECT_TRUE(Matches(empty_start, "b"));
  EXPECT_TRUE(Matches(empty_start, "ab"));
  EXPECT_TRUE(Matches(empty_start, "aab"));
  EXPECT_FALSE(Matches(empty_start, "aaab"));
}

TEST(Ebnf, StringsClassesAndRepetition) {
  const auto g = Ebnf(R"(root ::= 'q' "\"\t\u00e9" [^a-z\]]{2,3} [\x41-\x43]?)");
  EXPECT_TRUE(Matches(g, "q\"\t\xC3\xA9" "12"));
  EXPECT_TRUE(Matches(g, "q\"\t\xC3\xA9" "1]2" "B") == false) << "] is excluded";
  EXPECT_TRUE(Matches(g, "q\"\t\xC3\xA9" "123C"));
  EXPECT_FALSE(Matches(g, "q\"\t\xC3\xA9" "1a"));
}

TEST(Ebnf, RulesSpanLines) {
  const auto g = Ebnf("root ::= \"a\"\n   \"b\"\n | \"c\"\nother ::= \"z\"");
  EXPECT_TRUE(Matches(g, "ab"));
  EXPECT_TRUE(Matches(g, "c"));
  EXPECT_FALSE(Matches(g, "z"));
}

TEST(Ebnf, ErrorsNameLineAndColumn) {
  EXPECT_NE(ErrorOf("root ::= \"a\"\nfoo ::= bar").find("line 2 column 9: the rule 'bar' is used but not defined"),
            std::string::npos) << ErrorOf("root ::= \"a\"\nfoo ::= bar");
  EXPECT_NE(ErrorOf("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"a").find("line 1 column 12: an unterminated string"), std::string::npos)
      << ErrorOf("root ::= \"a");
  EXPECT_NE(ErrorOf("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(ErrorOf("root \"a\"").find("expected '::='"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= x\nx ::= x").find("matches no text"), std::string::npos) << ErrorOf("root ::= x\nx ::= x");
  EXPECT_NE(ErrorOf("root ::= [b-a]").find("out of order"), std::string::npos);
}

TEST(Ebnf, UnproductiveAlternativesAreDropped) {
  // `loop` can never finish; the grammar is still the other alternative.
  const auto g = Ebnf("root ::= \"a\" | loop\nloop ::= \"b\" loop");
  EXPECT_TRUE(Matches(g, "a"));
  EXPECT_FALSE(IsPrefix(g, "b")) << "a prefix with no completion is not valid";
}

}  // namespace
}  // namespace fission::grammar
