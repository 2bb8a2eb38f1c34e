// Python's `random.Random(seed)` (MT19937 seeded by init_by_array) and the parts lm-eval uses to
// pick few-shot exemplars: `sample(population, k)`. With the same seed the same exemplars are
// chosen as lm-eval chooses them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fission::eval {

class PythonRandom {
 public:
  // random.Random(seed) for 0 <= seed < 2**32.
  explicit PythonRandom(std::uint32_t seed);

  std::uint32_t NextU32();
  // random.random()
  double Random();
  // random.getrandbits(k), 1 <= k <= 32.
  std::uint32_t GetRandBits(int k);
  // random._randbelow(n), n >= 1.
  std::uint64_t RandBelow(std::uint64_t n);
  // Indices chosen by random.sample(range(n), k), in order.
  std::vector<std::size_t> Sample(std::size_t n, std::size_t k);

 private:
  static constexpr int kN = 624;
  std::array<std::uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace fission::eval
