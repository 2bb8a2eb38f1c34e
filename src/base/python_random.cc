#include "base/python_random.h"

#include <bit>
#include <cmath>
#include <unordered_set>
#include <utility>

#include "base/error.h"

namespace fission {

PythonRandom::PythonRandom(std::uint32_t seed) {
  // init_genrand(19650218) followed by init_by_array({seed}), as CPython seeds from an int.
  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i) mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<std::uint32_t>(i);
  const std::uint32_t key[1] = {seed};
  const int key_length = 1;
  int i = 1, j = 0;
  for (int k = kN; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] + static_cast<std::uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<std::uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;
  index_ = kN;
}

std::uint32_t PythonRandom::NextU32() {
  constexpr int kM = 397;
  constexpr std::uint32_t kUpper = 0x80000000u, kLower = 0x7fffffffu, kMatrix = 0x9908b0dfu;
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const std::uint32_t y = (mt_[k] & kUpper) | (mt_[(k + 1) % kN] & kLower);
      mt_[k] = mt_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrix : 0u);
    }
    index_ = 0;
  }
  std::uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

double PythonRandom::Random() {
  const std::uint32_t a = NextU32() >> 5, b = NextU32() >> 6;
  return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

std::uint32_t PythonRandom::GetRandBits(int k) {
  FISSION_CHECK(k >= 1 && k <= 32, "getrandbits(", k, ")");
  return NextU32() >> (32 - k);
}

std::uint64_t PythonRandom::RandBelow(std::uint64_t n) {
  FISSION_CHECK(n >= 1 && n <= 0xffffffffull, "randbelow(", n, ")");
  const int k = static_cast<int>(std::bit_width(n));  // n.bit_length()
  std::uint64_t r = GetRandBits(k);
  while (r >= n) r = GetRandBits(k);
  return r;
}

std::vector<std::size_t> PythonRandom::Sample(std::size_t n, std::size_t k) {
  if (k > n) Fail("sample larger than population (", k, " > ", n, ")");
  std::vector<std::size_t> result(k);
  std::size_t setsize = 21;
  if (k > 5) setsize += static_cast<std::size_t>(std::pow(4.0, std::ceil(std::log(k * 3.0) / std::log(4.0))));
  if (n <= setsize) {
    std::vector<std::size_t> pool(n);
    for (std::size_t i = 0; i < n; ++i) pool[i] = i;
    for (std::size_t i = 0; i < k; ++i) {
      const std::size_t j = RandBelow(n - i);
      result[i] = pool[j];
      pool[j] = pool[n - i - 1];
    }
  } else {
    std::unordered_set<std::size_t> selected;
    for (std::size_t i = 0; i < k; ++i) {
      std::size_t j = RandBelow(n);
      while (selected.count(j)) j = RandBelow(n);
      selected.insert(j);
      result[i] = j;
    }
  }
  return result;
}

std::vector<std::size_t> PythonRandom::Shuffle(std::size_t n) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  for (std::size_t i = n; i-- > 1;) std::swap(order[i], order[RandBelow(i + 1)]);
  return order;
}

std::size_t PythonRandom::ChoiceIndex(std::size_t n) {
  return static_cast<std::size_t>(std::floor(Random() * static_cast<double>(n)));
}

}  // namespace fission
