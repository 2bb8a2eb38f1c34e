// Integer ranges as regexes, checked against every integer near the bounds.
#include <gtest/gtest.h>

#include <optional>

#include "base/error.h"
#include "grammar/grammar_testlib.h"
#include "grammar/integer_range.h"
#include "grammar/regex_parser.h"

namespace fission::grammar {
namespace {

using testing::Compile;
using testing::Matches;

void CheckRange(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  const std::string regex = IntegerRangeRegex(lo, hi);
  const auto g = Compile(RegexGrammar(regex));
  for (std::int64_t v = -1200; v <= 1200; ++v) {
    const bool inside = (!lo || v >= *lo) && (!hi || v <= *hi);
    EXPECT_EQ(Matches(g, std::to_string(v)), inside) << v << " in [" << lo.value_or(-999999) << ", "
                                                     << hi.value_or(999999) << "]: " << regex;
  }
  EXPECT_FALSE(Matches(g, "-0"));
  EXPECT_FALSE(Matches(g, "007"));
  EXPECT_FALSE(Matches(g, "+1"));
}

TEST(IntegerRange, BoundedAndUnbounded) {
  CheckRange(0, 100);
  CheckRange(13, 57);
  CheckRange(-57, -13);
  CheckRange(-5, 1000);
  CheckRange(7, std::nullopt);
  CheckRange(std::nullopt, -3);
  CheckRange(std::nullopt, 250);
  CheckRange(-1000, std::nullopt);
  CheckRange(100, 100);
  CheckRange(std::nullopt, std::nullopt);
  CheckRange(99, 1001);
}

TEST(IntegerRange, LargeNumbers) {
  const auto g = Compile(RegexGrammar(IntegerRangeRegex(1000000000, std::nullopt)));
  EXPECT_TRUE(Matches(g, "1000000000"));
  EXPECT_TRUE(Matches(g, "123456789012345"));
  EXPECT_FALSE(Matches(g, "999999999"));
  EXPECT_THROW(IntegerRangeRegex(5, 4), Error);
}

}  // namespace
}  // namespace fission::grammar
