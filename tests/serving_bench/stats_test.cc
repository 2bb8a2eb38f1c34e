#include "serving_bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fission::serving_bench {
namespace {

TEST(SummaryTest, MatchesNumpyLinearPercentiles) {
  // np.percentile([15, 20, 35, 40, 50], p) for p = 0, 25, 40, 50, 99, 100.
  Summary s({40, 15, 35, 20, 50});
  EXPECT_DOUBLE_EQ(s.Percentile(0), 15);
  EXPECT_DOUBLE_EQ(s.Percentile(25), 20);
  EXPECT_DOUBLE_EQ(s.Percentile(40), 29);  // rank 1.6: 20 + 0.6 * 15
  EXPECT_DOUBLE_EQ(s.median(), 35);
  EXPECT_DOUBLE_EQ(s.Percentile(99), 49.6);  // rank 3.96: 40 + 0.96 * 10
  EXPECT_DOUBLE_EQ(s.Percentile(100), 50);
  EXPECT_DOUBLE_EQ(s.mean(), 32);
  // Population standard deviation: sqrt(((17^2 + 12^2 + 3^2 + 8^2 + 18^2) / 5)) = sqrt(166).
  EXPECT_DOUBLE_EQ(s.std(), std::sqrt(166.0));
  EXPECT_DOUBLE_EQ(s.max(), 50);
}

TEST(SummaryTest, EvenCountMedianAndSingleValue) {
  EXPECT_DOUBLE_EQ(Summary({1, 2, 3, 4}).median(), 2.5);
  Summary one({7});
  EXPECT_DOUBLE_EQ(one.Percentile(99), 7);
  EXPECT_DOUBLE_EQ(one.std(), 0);
}

TEST(SummaryTest, EmptyIsZero) {
  Summary s;
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.mean(), 0);
  EXPECT_EQ(s.median(), 0);
  EXPECT_EQ(s.Percentile(99), 0);
  EXPECT_EQ(s.max(), 0);
}

TEST(SummaryTest, ScaledToMilliseconds) {
  Summary ms = Summary({0.1, 0.2}).Scaled(1000);
  EXPECT_DOUBLE_EQ(ms.mean(), 150);
  EXPECT_DOUBLE_EQ(ms.Percentile(50), 150);
}

}  // namespace
}  // namespace fission::serving_bench
