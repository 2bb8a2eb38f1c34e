// Python's `random.Random(seed)` (MT19937 seeded by init_by_array) and the draws the reference
// tools make with it: lm-eval's few-shot exemplars (`sample`), sglang.bench_serving's dataset
// shuffle (`shuffle`) and its uniform picks (`choice`, `choices`). With the same seed the same
// draws come out as in CPython.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fission {

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
  // The order random.shuffle(list(range(n))) leaves: element i of the result is the index that
  // ends at position i.
  std::vector<std::size_t> Shuffle(std::size_t n);
  // The index random.choices(range(n)) picks: floor(random() * n).
  std::size_t ChoiceIndex(std::size_t n);

 private:
  static constexpr int kN = 624;
  std::array<std::uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace fission
