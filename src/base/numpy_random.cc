#include "base/numpy_random.h"

#include "base/error.h"

namespace fission {

namespace {

// The smallest all-ones mask that covers `range` (numpy's gen_mask).
std::uint64_t Mask(std::uint64_t range) {
  std::uint64_t mask = range;
  for (int shift = 1; shift < 64; shift *= 2) mask |= mask >> shift;
  return mask;
}

}  // namespace

std::uint64_t NumpyRandom::Bounded(std::uint64_t range) {
  if (range == 0) return 0;
  const std::uint64_t mask = Mask(range);
  if (range <= 0xffffffffull) {
    std::uint64_t v;
    do {
      v = mt_() & mask;
    } while (v > range);
    return v;
  }
  std::uint64_t v;
  do {
    const std::uint64_t hi = mt_();
    v = ((hi << 32) | mt_()) & mask;
  } while (v > range);
  return v;
}

std::int64_t NumpyRandom::RandInt(std::int64_t low, std::int64_t high) {
  if (high <= low) Fail("randint: low (", low, ") must be below high (", high, ")");
  return low + static_cast<std::int64_t>(Bounded(static_cast<std::uint64_t>(high - low - 1)));
}

std::vector<std::int64_t> NumpyRandom::RandInts(std::int64_t low, std::int64_t high, std::size_t n) {
  std::vector<std::int64_t> out(n);
  for (std::int64_t& v : out) v = RandInt(low, high);
  return out;
}

}  // namespace fission
