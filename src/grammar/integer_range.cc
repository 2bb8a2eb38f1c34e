#include "grammar/integer_range.h"

#include <vector>

#include "base/error.h"

namespace fission::grammar {
namespace {

constexpr std::int64_t kLimit = 1'000'000'000'000'000'000;  // 10^18

std::int64_t Pow10(int n) {
  std::int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

int Digits(std::int64_t v) {
  int n = 1;
  while (v >= 10) {
    v /= 10;
    ++n;
  }
  return n;
}

std::string DigitClass(int lo, int hi) {
  if (lo == hi) return std::string(1, static_cast<char>('0' + lo));
  return StrCat("[", lo, "-", hi, "]");
}

// [a, b], both of `n` digits (leading zeros allowed in the tail), as alternatives.
void SameLength(const std::string& a, const std::string& b, std::vector<std::string>* out, const std::string& prefix) {
  if (a.empty()) {
    out->push_back(prefix);
    return;
  }
  const int da = a[0] - '0', db = b[0] - '0';
  const std::string ra = a.substr(1), rb = b.substr(1);
  if (da == db) {
    SameLength(ra, rb, out, prefix + a[0]);
    return;
  }
  const std::string zeros(ra.size(), '0'), nines(ra.size(), '9');
  // The first digit's own tails where they are partial; the digits between take any tail.
  int from = da, to = db;
  if (ra != zeros) {
    SameLength(ra, nines, out, prefix + a[0]);
    ++from;
  }
  const bool b_full = rb == nines;
  if (!b_full) --to;
  if (from <= to) {
    std::string s = prefix + DigitClass(from, to);
    if (!ra.empty()) s += StrCat("[0-9]{", ra.size(), "}");
    out->push_back(s);
  }
  if (!b_full) SameLength(zeros, rb, out, prefix + b[0]);
}

// Non-negative [a, b] (b = -1: unbounded).
std::string NonNegative(std::int64_t a, std::int64_t b) {
  std::vector<std::string> parts;
  const int la = Digits(a);
  const int lb = b < 0 ? -1 : Digits(b);
  for (int len = la; b < 0 ? len <= la : len <= lb; ++len) {
    const std::int64_t lo = len == la ? a : Pow10(len - 1);
    const std::int64_t hi = (b >= 0 && len == lb) ? b : Pow10(len) - 1;
    if (lo > hi) continue;
    SameLength(std::to_string(lo), std::to_string(hi), &parts, "");
  }
  if (b < 0) parts.push_back(StrCat("[1-9][0-9]{", la, ",}"));  // every longer number
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "|" : "") + parts[i];
  return out;
}

}  // namespace

std::string IntegerRangeRegex(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi) {
  for (const auto& v : {lo, hi})
    if (v && (*v > kLimit || *v < -kLimit)) Fail("an integer bound beyond 10^18 in magnitude");
  if (lo && hi && *lo > *hi) Fail("an empty integer range [", *lo, ", ", *hi, "]");
  std::vector<std::string> options;
  // Negative part: -[|hi'|, |lo|] where hi' = min(hi, -1).
  if (!lo || *lo < 0) {
    const std::int64_t top = hi ? std::min<std::int64_t>(*hi, -1) : -1;
    if (!hi || *hi < 0 || top == -1) {
      if (!lo) {
        options.push_back("-(" + NonNegative(-top, -1) + ")");
      } else if (top >= *lo) {
        options.push_back("-(" + NonNegative(-top, -*lo) + ")");
      }
    }
  }
  // Non-negative part.
  if (!hi || *hi >= 0) {
    const std::int64_t bottom = lo ? std::max<std::int64_t>(*lo, 0) : 0;
    options.push_back(NonNegative(bottom, hi ? *hi : -1));
  }
  std::string out;
  for (std::size_t i = 0; i < options.size(); ++i) out += (i ? "|" : "") + ("(" + options[i] + ")");
  return out;
}

}  // namespace fission::grammar
