#include "tokenizer/unicode.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/unicode_tables.h"

namespace fission::tokenizer {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Hangul syllable arithmetic (Unicode chapter 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

struct Span {
  const std::uint32_t* data;
  std::uint32_t size;
};

// Indexes over the generated tables, built once.
struct UnicodeIndex {
  std::unordered_map<char32_t, std::uint8_t> ccc;
  std::unordered_map<char32_t, Span> canonical;
  std::unordered_map<char32_t, Span> compat;
  std::unordered_map<std::uint64_t, char32_t> compose;
  std::unordered_map<char32_t, Span> lower;
  // Per BMP code point: bit 0 set when NFC may change text containing it, bit 1 the same for NFKC.
  std::vector<std::uint8_t> bmp_unstable;
  std::unordered_set<char32_t> astral_unstable_nfc, astral_unstable_nfkc;

  static void LoadFlat(const std::uint32_t* t, std::size_t n, std::unordered_map<char32_t, Span>* out) {
    for (std::size_t i = 0; i < n;) {
      std::uint32_t len = t[i + 1];
      (*out)[t[i]] = Span{t + i + 2, len};
      i += 2 + len;
    }
  }

  UnicodeIndex() {
    using namespace unicode_data;
    for (std::size_t i = 0; i < kCombiningClass_size; ++i) ccc[kCombiningClass[2 * i]] = kCombiningClass[2 * i + 1];
    LoadFlat(kCanonicalDecomposition, kCanonicalDecomposition_size, &canonical);
    LoadFlat(kCompatDecomposition, kCompatDecomposition_size, &compat);
    LoadFlat(kLowercase, kLowercase_size, &lower);
    std::unordered_set<char32_t> seconds;
    for (std::size_t i = 0; i < kCompositionPairs_size; ++i) {
      const std::uint32_t* row = kCompositionPairs + 3 * i;
      compose[(std::uint64_t{row[0]} << 32) | row[1]] = row[2];
      seconds.insert(row[1]);
    }
    bmp_unstable.assign(0x10000, 0);
    auto mark = [&](char32_t c, std::uint8_t bits) {
      if (c < 0x10000) {
        bmp_unstable[c] |= bits;
      } else {
        if (bits & 1) astral_unstable_nfc.insert(c);
        if (bits & 2) astral_unstable_nfkc.insert(c);
      }
    };
    for (const auto& [c, cls] : ccc) mark(c, 3);
    for (const auto& [c, span] : canonical) mark(c, 3);
    for (const auto& [c, span] : compat) mark(c, 2);
    for (char32_t c : seconds) mark(c, 3);
    for (char32_t c = kVBase; c < kVBase + kVCount; ++c) mark(c, 3);
    for (char32_t c = kTBase + 1; c < kTBase + kTCount; ++c) mark(c, 3);
  }

  std::uint8_t CombiningClass(char32_t c) const {
    if (c < 0x300) return 0;
    auto it = ccc.find(c);
    return it == ccc.end() ? 0 : it->second;
  }
  bool Unstable(char32_t c, bool compat_form) const {
    if (c < 0x10000) return bmp_unstable[c] & (compat_form ? 2 : 1);
    return compat_form ? astral_unstable_nfkc.count(c) : astral_unstable_nfc.count(c);
  }
};

const UnicodeIndex& Index() {
  static const UnicodeIndex index;
  return index;
}

void Decompose(char32_t c, bool compat, const UnicodeIndex& index, std::vector<char32_t>* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    int s = c - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (c < 0xA0) {
    out->push_back(c);
    return;
  }
  if (compat) {
    auto it = index.compat.find(c);
    if (it != index.compat.end()) {
      out->insert(out->end(), it->second.data, it->second.data + it->second.size);
      return;
    }
  }
  auto it = index.canonical.find(c);
  if (it != index.canonical.end()) {
    out->insert(out->end(), it->second.data, it->second.data + it->second.size);
  } else {
    out->push_back(c);
  }
}

char32_t ComposePair(char32_t a, char32_t b, const UnicodeIndex& index) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  auto it = index.compose.find((std::uint64_t{a} << 32) | b);
  return it == index.compose.end() ? 0 : it->second;
}

}  // namespace

char32_t NextCodePoint(std::string_view s, std::size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = *pos, n = s.size();
  unsigned char b = p[i];
  if (b < 0x80) {
    *pos = i + 1;
    return b;
  }
  int len;
  char32_t cp;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    len = 2, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    len = 3, cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    len = 4, cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *pos = i + 1;
    return kReplacement;
  }
  for (int k = 1; k < len; ++k) {
    if (i + k >= n) {
      *pos = i + k;
      return kReplacement;
    }
    unsigned char c = p[i + k];
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) {
      *pos = i + k;
      return kReplacement;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *pos = i + len;
  return cp;
}

void AppendUtf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t start = i;
    char32_t cp = NextCodePoint(s, &i);
    if (cp == kReplacement && !(i - start == 3 && s.substr(start, 3) == "\xEF\xBF\xBD")) return false;
  }
  return true;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    if (static_cast<unsigned char>(bytes[i]) < 0x80) {
      out.push_back(bytes[i++]);
      continue;
    }
    std::size_t start = i;
    char32_t cp = NextCodePoint(bytes, &i);
    if (cp == kReplacement) {
      AppendUtf8(&out, kReplacement);
    } else {
      out.append(bytes.substr(start, i - start));
    }
  }
  return out;
}

bool IsWhitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsWordChar(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  return !IsWhitespace(c);
}

std::string Normalize(std::string_view s, NormalForm form) {
  const UnicodeIndex& index = Index();
  bool compat = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  bool compose = form == NormalForm::kNfc || form == NormalForm::kNfkc;
  // Quick check: text made only of characters that never change is returned as is.
  bool stable = true;
  for (std::size_t i = 0; i < s.size() && stable;) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t c = NextCodePoint(s, &i);
    if (index.Unstable(c, compat) || (!compose && c >= kSBase && c < kSBase + kSCount)) stable = false;
  }
  if (stable) return std::string(s);

  std::vector<char32_t> buf;
  buf.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) Decompose(NextCodePoint(s, &i), compat, index, &buf);
  // Canonical ordering: stable sort of each run of non-starters by combining class.
  for (std::size_t i = 0; i < buf.size();) {
    if (index.CombiningClass(buf[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < buf.size() && index.CombiningClass(buf[j]) != 0) ++j;
    std::stable_sort(buf.begin() + i, buf.begin() + j, [&](char32_t a, char32_t b) {
      return index.CombiningClass(a) < index.CombiningClass(b);
    });
    i = j;
  }
  if (compose && !buf.empty()) {
    std::size_t starter_pos = 0, out_pos = 1;
    int last_class = index.CombiningClass(buf[0]);
    if (last_class != 0) last_class = 256;  // a leading non-starter never composes
    for (std::size_t i = 1; i < buf.size(); ++i) {
      char32_t c = buf[i];
      int cls = index.CombiningClass(c);
      char32_t composite = last_class == 256 ? 0 : ComposePair(buf[starter_pos], c, index);
      if (composite != 0 && (last_class < cls || last_class == 0)) {
        buf[starter_pos] = composite;
        continue;
      }
      if (cls == 0) starter_pos = out_pos;
      last_class = cls;
      buf[out_pos++] = c;
    }
    buf.resize(out_pos);
  }
  std::string out;
  out.reserve(s.size() + 8);
  for (char32_t c : buf) AppendUtf8(&out, c);
  return out;
}

std::string ToLower(std::string_view s) {
  const UnicodeIndex& index = Index();
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
      ++i;
      continue;
    }
    char32_t c = NextCodePoint(s, &i);
    auto it = index.lower.find(c);
    if (it == index.lower.end()) {
      AppendUtf8(&out, c);
    } else {
      for (std::uint32_t k = 0; k < it->second.size; ++k) AppendUtf8(&out, it->second.data[k]);
    }
  }
  return out;
}

}  // namespace fission::tokenizer
