// Reference values printed by CPython 3 for the same seeds.
#include "base/python_random.h"

#include <gtest/gtest.h>

namespace fission {
namespace {

TEST(PythonRandomTest, RandomMatchesCPython) {
  PythonRandom r(42);
  EXPECT_DOUBLE_EQ(r.Random(), 0.6394267984578837);  // random.Random(42).random()
  PythonRandom s(1234);
  EXPECT_DOUBLE_EQ(s.Random(), 0.9664535356921388);
}

TEST(PythonRandomTest, SampleMatchesCPython) {
  // r = random.Random(1234); [r.sample(range(7473), 5) for _ in range(3)]: the exemplars lm-eval
  // picks for the first three gsm8k test questions.
  PythonRandom r(1234);
  EXPECT_EQ(r.Sample(7473, 5), (std::vector<size_t>{6374, 3610, 957, 61, 742}));
  EXPECT_EQ(r.Sample(7473, 5), (std::vector<size_t>{7462, 6610, 4769, 286, 5501}));
  EXPECT_EQ(r.Sample(7473, 5), (std::vector<size_t>{5677, 687, 806, 6279, 2905}));
  // k > 5 widens the set threshold.
  EXPECT_EQ(PythonRandom(1234).Sample(7473, 8), (std::vector<size_t>{6374, 3610, 957, 61, 742, 7462, 6610, 4769}));
  // A small population takes the pool branch.
  PythonRandom small(0);
  EXPECT_EQ(small.Sample(10, 4), (std::vector<size_t>{6, 9, 0, 2}));
  EXPECT_EQ(small.GetRandBits(32), 4146640122u);
  PythonRandom seven(7);
  EXPECT_EQ(seven.Sample(10, 4), (std::vector<size_t>{5, 2, 6, 9}));
  EXPECT_EQ(seven.Sample(10, 4), (std::vector<size_t>{0, 1, 8, 2}));
}

TEST(PythonRandomTest, ShuffleAndChoicesMatchCPython) {
  // x = list(range(10)); random.seed(7); random.shuffle(x)
  EXPECT_EQ(PythonRandom(7).Shuffle(10), (std::vector<size_t>{8, 3, 1, 4, 7, 0, 9, 6, 2, 5}));
  EXPECT_EQ(PythonRandom(1).Shuffle(7), (std::vector<size_t>{3, 6, 5, 2, 0, 4, 1}));
  EXPECT_TRUE(PythonRandom(1).Shuffle(0).empty());
  // r = random.Random(3); [r.choices(range(50))[0] for _ in range(5)]
  PythonRandom r(3);
  std::vector<size_t> picks;
  for (int i = 0; i < 5; ++i) picks.push_back(r.ChoiceIndex(50));
  EXPECT_EQ(picks, (std::vector<size_t>{11, 27, 18, 30, 31}));
}

}  // namespace
}  // namespace fission
