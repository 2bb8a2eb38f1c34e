// A set of byte values, the alphabet of the grammar layer's automata.
#pragma once

#include <array>
#include <cstdint>

namespace fission::grammar {

class ByteSet {
 public:
  ByteSet() = default;
  static ByteSet Of(std::uint8_t b) {
    ByteSet s;
    s.Add(b);
    return s;
  }
  static ByteSet Range(std::uint8_t lo, std::uint8_t hi) {
    ByteSet s;
    s.AddRange(lo, hi);
    return s;
  }
  static ByteSet All() { return Range(0, 255); }

  void Add(std::uint8_t b) { words_[b >> 6] |= 1ull << (b & 63); }
  void AddRange(std::uint8_t lo, std::uint8_t hi) {
    for (int b = lo; b <= hi; ++b) Add(static_cast<std::uint8_t>(b));
  }
  void AddAll(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words_[i] |= o.words_[i];
  }
  bool Has(std::uint8_t b) const { return (words_[b >> 6] >> (b & 63)) & 1; }
  bool Empty() const { return (words_[0] | words_[1] | words_[2] | words_[3]) == 0; }
  bool Intersects(const ByteSet& o) const {
    for (int i = 0; i < 4; ++i)
      if (words_[i] & o.words_[i]) return true;
    return false;
  }
  ByteSet Complement() const {
    ByteSet s;
    for (int i = 0; i < 4; ++i) s.words_[i] = ~words_[i];
    return s;
  }
  bool operator==(const ByteSet& o) const { return words_ == o.words_; }
  std::uint64_t Hash() const {
    return words_[0] * 0x9e3779b97f4a7c15ull ^ words_[1] * 0xbf58476d1ce4e5b9ull ^ words_[2] * 0x94d049bb133111ebull ^
           words_[3];
  }

 private:
  std::array<std::uint64_t, 4> words_{};
};

}  // namespace fission::grammar
