// Reference values printed by numpy (legacy global generator) for the same seeds.
#include "base/numpy_random.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace fission {
namespace {

TEST(NumpyRandomTest, RandIntMatchesNumpy) {
  // np.random.seed(0); np.random.randint(0, 10, size=5)
  EXPECT_EQ(NumpyRandom(0).RandInts(0, 10, 5), (std::vector<std::int64_t>{5, 0, 3, 3, 7}));
  // np.random.seed(42); np.random.randint(0, 100, size=5)
  EXPECT_EQ(NumpyRandom(42).RandInts(0, 100, 5), (std::vector<std::int64_t>{51, 92, 14, 71, 60}));
  // A one-value range draws nothing: the next draw is the first of the stream.
  NumpyRandom r(0);
  EXPECT_EQ(r.RandInt(7, 8), 7);
  EXPECT_EQ(r.RandInt(0, 10), 5);
  EXPECT_THROW(r.RandInt(3, 3), Error);
}

TEST(NumpyRandomTest, WideRangesStayInBounds) {
  NumpyRandom r(1);
  for (int i = 0; i < 1000; ++i) {
    const std::int64_t v = r.RandInt(-5, (std::int64_t{1} << 40));
    EXPECT_GE(v, -5);
    EXPECT_LT(v, std::int64_t{1} << 40);
  }
}

}  // namespace
}  // namespace fission
