// Tables as lm-eval prints them (copied from published gsm8k runs).
#include "eval/table.h"

#include <gtest/gtest.h>

namespace fission::eval {
namespace {

TEST(ResultsTableTest, FourDecimalValues) {
  const std::string want =
      "|Tasks|Version|     Filter     |n-shot|  Metric   |   |Value |   |Stderr|\n"
      "|-----|------:|----------------|-----:|-----------|---|-----:|---|-----:|\n"
      "|gsm8k|      3|flexible-extract|     5|exact_match|↑  |0.5049|±  |0.0138|\n"
      "|     |       |strict-match    |     5|exact_match|↑  |0.5027|±  |0.0138|\n";
  EXPECT_EQ(FormatResultsTable({{"gsm8k", 3, "flexible-extract", 5, "exact_match", 0.5049, 0.0138},
                                {"gsm8k", 3, "strict-match", 5, "exact_match", 0.5027, 0.0138}}),
            want);
}

TEST(ResultsTableTest, TrailingZerosGoPerColumn) {
  const std::string want =
      "|Tasks|Version|     Filter     |n-shot|  Metric   |   |Value|   |Stderr|\n"
      "|-----|------:|----------------|-----:|-----------|---|----:|---|-----:|\n"
      "|gsm8k|      3|flexible-extract|     5|exact_match|↑  | 0.96|±  | 0.028|\n"
      "|     |       |strict-match    |     5|exact_match|↑  | 0.96|±  | 0.028|\n";
  EXPECT_EQ(FormatResultsTable({{"gsm8k", 3, "flexible-extract", 5, "exact_match", 0.96, 0.028},
                                {"gsm8k", 3, "strict-match", 5, "exact_match", 0.96, 0.028}}),
            want);
}

TEST(ResultsTableTest, PerfectScoreAndMissingStderr) {
  const std::string perfect =
      "|Tasks|Version|     Filter     |n-shot|  Metric   |   |Value|   |Stderr|\n"
      "|-----|------:|----------------|-----:|-----------|---|----:|---|-----:|\n"
      "|gsm8k|      3|flexible-extract|     3|exact_match|↑  |    1|±  |     0|\n"
      "|     |       |strict-match    |     3|exact_match|↑  |    1|±  |     0|\n";
  EXPECT_EQ(FormatResultsTable({{"gsm8k", 3, "flexible-extract", 3, "exact_match", 1.0, 0.0},
                                {"gsm8k", 3, "strict-match", 3, "exact_match", 1.0, 0.0}}),
            perfect);
  // One sample has no standard error: the column turns to text.
  const std::string one = FormatResultsTable({{"gsm8k", 3, "flexible-extract", 5, "exact_match", 1.0, std::nullopt},
                                              {"gsm8k", 3, "strict-match", 5, "exact_match", 0.0, std::nullopt}});
  EXPECT_NE(one.find("|↑  |    1|±  |N/A   |\n"), std::string::npos) << one;
  EXPECT_NE(one.find("|↑  |    0|±  |N/A   |\n"), std::string::npos) << one;
}

}  // namespace
}  // namespace fission::eval
