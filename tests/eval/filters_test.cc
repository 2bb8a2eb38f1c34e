// gsm8k answer extraction and exact match against a table of model responses. The expected
// extractions follow lm-eval's filters (Python `re` semantics) for each response.
#include "eval/filters.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "eval/regex.h"

namespace fission::eval {
namespace {

struct Case {
  const char* response;
  const char* gold;  // a gsm8k reference solution ending in "#### N"
  const char* strict;
  const char* flexible;
  bool strict_correct;
  bool flexible_correct;
};

// Commas, dollars, decimals, negatives, trailing periods, no "####", several numbers.
const Case kCases[] = {
    {"She makes 9 * 2 = $18 every day.\n#### 18", "Some reasoning.\n#### 18", "18", "18", true, true},
    {"#### 1,000", "Some reasoning.\n#### 1000", "1,000", "1,000", true, true},
    {"The total is $1,234.50.\n#### 1234.5", "Some reasoning.\n#### 1234.5", "1234.5", "1234.5", true, true},
    {"He loses 5 dollars.\n#### -5", "Some reasoning.\n#### -5", "-5", "-5", true, true},
    {"So the answer is 42.", "Some reasoning.\n#### 42", "[invalid]", "42.", false, true},
    {"The answer is $42.", "Some reasoning.\n#### 42", "[invalid]", "$42.", false, true},
    {"#### 42.", "Some reasoning.\n#### 42", "42.", "42.", true, true},
    {"#### $42", "Some reasoning.\n#### 42", "[invalid]", "$42", false, true},
    {"First 3 apples, then 4 more, so 7 apples.\n#### 7", "Some reasoning.\n#### 7", "7", "7", true, true},
    {"3 + 4 = 7 apples", "Some reasoning.\n#### 7", "[invalid]", "7", false, true},
    {"No numbers here.", "Some reasoning.\n#### 18", "[invalid]", "[invalid]", false, false},
    {"", "Some reasoning.\n#### 0", "[invalid]", "[invalid]", false, false},
    {"#### 0.5", "Some reasoning.\n#### 0.5", "0.5", "0.5", true, true},
    {"The price is $0.50 each", "Some reasoning.\n#### 0.5", "[invalid]", "$0.50", false, false},
    {"Temperature drops to -12 degrees", "Some reasoning.\n#### -12", "[invalid]", "-12", false, true},
    {"#### -1,250", "Some reasoning.\n#### -1250", "-1,250", "-1,250", true, true},
    {"He pays 12,345 dollars in total.", "Some reasoning.\n#### 12345", "[invalid]", "12,345", false, true},
    {"It costs 1.5 dollars. #### 1.5", "Some reasoning.\n#### 1.5", "1.5", "1.5", true, true},
    {"#### 18\n\nQuestion: next", "Some reasoning.\n#### 18", "18", "18", true, true},
    {"#### 18 #### 19", "Some reasoning.\n#### 18", "18", "19", true, false},
    {"#### 7\nThe answer is 8", "Some reasoning.\n#### 7", "7", "8", true, false},
    {"Answer: 7.0", "Some reasoning.\n#### 7", "[invalid]", "7.0", false, false},
    {"#### 7.0", "Some reasoning.\n#### 7", "7.0", "7.0", false, false},
    {"The answer is 5", "Some reasoning.\n#### 5", "[invalid]", "5", false, true},
    {"6 cookies", "Some reasoning.\n#### 6", "[invalid]", "6", false, true},
    {"1/2 of 10 is 5", "Some reasoning.\n#### 5", "[invalid]", "5", false, true},
    {"100%", "Some reasoning.\n#### 100", "[invalid]", "100", false, true},
    {"It takes 3 hours and 20 minutes", "Some reasoning.\n#### 20", "[invalid]", "20", false, true},
    {"x = 2, y = 3", "Some reasoning.\n#### 3", "[invalid]", "3", false, true},
    {"#### 3,", "Some reasoning.\n#### 3", "3,", "3,", true, true},
    {"#### .5", "Some reasoning.\n#### .5", ".5", ".5", true, true},
    {"The result: 1,000,000.", "Some reasoning.\n#### 1000000", "[invalid]", "1,000,000.", false, true},
    {"Total: $ 45", "Some reasoning.\n#### 45", "[invalid]", "45", false, true},
    {"She has -3 dollars, i.e. 3 debt", "Some reasoning.\n#### 3", "[invalid]", "3", false, true},
    {"Cost is $5.", "Some reasoning.\n#### 5", "[invalid]", "$5.", false, true},
    {"####18", "Some reasoning.\n#### 18", "[invalid]", "18", false, true},
    {"#### 18 apples", "Some reasoning.\n#### 18", "18", "18", true, true},
    {"#### -0", "Some reasoning.\n#### 0", "-0", "-0", false, false},
    {"9.99.", "Some reasoning.\n#### 9.99", "[invalid]", "9.99.", false, true},
    {"He ran 5 km at 10:30", "Some reasoning.\n#### 30", "[invalid]", "30", false, true},
    {"It was 2023 when she had 4 cats", "Some reasoning.\n#### 4", "[invalid]", "4", false, true},
    {"Sum = 1,2,3", "Some reasoning.\n#### 123", "[invalid]", "1,2,3", false, true},
    {"#### 12\n#### 13", "Some reasoning.\n#### 12", "12", "13", true, false},
    {"The final answer is $\\boxed{25}$", "Some reasoning.\n#### 25", "[invalid]", "25", false, true},
    {"Step 1: 10\nStep 2: 20\n#### 30", "Some reasoning.\n#### 30", "30", "30", true, true},
};

TEST(Gsm8kFiltersTest, TableOfResponses) {
  ASSERT_GE(std::size(kCases), 40u);
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.response);
    EXPECT_EQ(StrictMatch(c.response), c.strict);
    EXPECT_EQ(FlexibleExtract(c.response), c.flexible);
    EXPECT_EQ(ExactMatch(StrictMatch(c.response), c.gold), c.strict_correct);
    EXPECT_EQ(ExactMatch(FlexibleExtract(c.response), c.gold), c.flexible_correct);
  }
}

TEST(Gsm8kFiltersTest, NormalisationRemovesCommasDollarsPrefixAndTrailingPeriod) {
  EXPECT_EQ(NormalizeForExactMatch("Janet sells 9 eggs.\n#### 1,018"), "1018");
  EXPECT_EQ(NormalizeForExactMatch("$12.50."), "12.50");
  EXPECT_EQ(NormalizeForExactMatch("#### a #### B"), "b");
  // Python's `$` also matches before a final newline.
  EXPECT_EQ(NormalizeForExactMatch("42.\n"), "42\n");
  EXPECT_EQ(NormalizeForExactMatch("[invalid]"), "[invalid]");
}

TEST(RegexTest, FindAllAndSubFollowPython) {
  Regex two("(a)|(b)");
  const auto m = two.FindAll("xaby");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(m[1], (std::vector<std::string>{"", "b"}));
  EXPECT_EQ(Regex("[0-9]+").FindAll("a1b22")[1][0], "22");
  EXPECT_EQ(Regex("x*").Sub("abc", "-"), "-a-b-c-");
  EXPECT_THROW(Regex("(unclosed"), Error);
}

}  // namespace
}  // namespace fission::eval
