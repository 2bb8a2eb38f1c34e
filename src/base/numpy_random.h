// numpy's legacy global generator as `np.random.seed(s)` leaves it (MT19937 seeded by
// init_genrand) and the draw sglang.bench_serving makes with it: `np.random.randint(low, high)`,
// which takes masked rejection samples of 32-bit outputs (64-bit ones for ranges wider than 2**32).
// With the same seed the same integers come out as in numpy.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace fission {

class NumpyRandom {
 public:
  // np.random.seed(seed).
  explicit NumpyRandom(std::uint32_t seed) : mt_(seed) {}

  // np.random.randint(low, high): one integer in [low, high); high > low.
  std::int64_t RandInt(std::int64_t low, std::int64_t high);
  // np.random.randint(low, high, size=n).
  std::vector<std::int64_t> RandInts(std::int64_t low, std::int64_t high, std::size_t n);

 private:
  std::uint64_t Bounded(std::uint64_t range);  // uniform in [0, range], range inclusive
  std::mt19937 mt_;  // init_genrand and genrand_int32, as numpy's mt19937_seed and next_uint32
};

}  // namespace fission
