#include "grammar/grammar.h"

#include <algorithm>

#include "base/error.h"

namespace fission::grammar {
namespace {

int Utf8Length(char32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// Splits [lo, hi] (code points of one encoded length) into pieces whose UTF-8 encodings are
// products of byte ranges: [a0-b0][a1-b1]... (the construction of Go's and RE2's UTF-8 ranges).
void SplitUtf8Range(char32_t lo, char32_t hi, std::vector<std::pair<std::string, std::string>>* out) {
  const int n = Utf8Length(lo);
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8Range(lo, lo | m, out);
        SplitUtf8Range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8Range(lo, (hi & ~m) - 1, out);
        SplitUtf8Range(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  AppendUtf8(lo, &a);
  AppendUtf8(hi, &b);
  out->emplace_back(std::move(a), std::move(b));
}

}  // namespace

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::vector<CodePointRange> ComplementCodePoints(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> out;
  char32_t next = 0;  // the first code point not yet covered
  for (const auto& [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    if (hi >= next) next = hi + 1;
    if (next > kMaxCodePoint) return out;
  }
  out.emplace_back(next, kMaxCodePoint);
  return out;
}

Grammar::Node Grammar::Add(Expr e) {
  exprs_.push_back(std::move(e));
  return static_cast<Node>(exprs_.size() - 1);
}

Grammar::Node Grammar::Empty() { return Add({}); }

Grammar::Node Grammar::Bytes(const ByteSet& set) {
  Expr e;
  e.kind = Kind::kBytes;
  e.bytes = set;
  return Add(std::move(e));
}

Grammar::Node Grammar::Literal(std::string_view text) {
  if (text.size() == 1) return Bytes(ByteSet::Of(static_cast<std::uint8_t>(text[0])));
  std::vector<Node> parts;
  for (char c : text) parts.push_back(Bytes(ByteSet::Of(static_cast<std::uint8_t>(c))));
  return parts.empty() ? Empty() : Seq(std::move(parts));
}

Grammar::Node Grammar::Seq(std::vector<Node> parts) {
  if (parts.size() == 1) return parts[0];
  Expr e;
  e.kind = parts.empty() ? Kind::kEmpty : Kind::kSeq;
  e.children = std::move(parts);
  return Add(std::move(e));
}

Grammar::Node Grammar::Alt(std::vector<Node> options) {
  FISSION_CHECK(!options.empty(), "an alternative needs options");
  if (options.size() == 1) return options[0];
  Expr e;
  e.kind = Kind::kAlt;
  e.children = std::move(options);
  return Add(std::move(e));
}

Grammar::Node Grammar::Repeat(Node x, std::int32_t min, std::int32_t max) {
  FISSION_CHECK(min >= 0 && (max == kUnbounded || max >= min));
  if (min == 1 && max == 1) return x;
  Expr e;
  e.kind = Kind::kRepeat;
  e.children = {x};
  e.min = min;
  e.max = max;
  return Add(std::move(e));
}

Grammar::Node Grammar::Ref(std::int32_t rule) {
  FISSION_CHECK(rule >= 0 && rule < num_rules());
  Expr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return Add(std::move(e));
}

Grammar::Node Grammar::CodePoints(std::vector<CodePointRange> ranges) {
  // Surrogates are not characters; splitting at the encoded-length boundaries keeps each piece
  // of one length.
  static constexpr std::pair<char32_t, char32_t> kPieces[] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, kMaxCodePoint}};
  std::vector<std::pair<std::string, std::string>> seqs;
  for (const auto& [lo, hi] : ranges)
    for (const auto& [plo, phi] : kPieces) {
      const char32_t a = std::max(lo, plo), b = std::min(hi, phi);
      if (a <= b) SplitUtf8Range(a, b, &seqs);
    }
  std::vector<Node> options;
  ByteSet single;  // one-byte characters form one set
  for (const auto& [a, b] : seqs) {
    if (a.size() == 1) {
      single.AddRange(static_cast<std::uint8_t>(a[0]), static_cast<std::uint8_t>(b[0]));
      continue;
    }
    std::vector<Node> parts;
    for (std::size_t i = 0; i < a.size(); ++i)
      parts.push_back(Bytes(ByteSet::Range(static_cast<std::uint8_t>(a[i]), static_cast<std::uint8_t>(b[i]))));
    options.push_back(Seq(std::move(parts)));
  }
  if (!single.Empty()) options.insert(options.begin(), Bytes(single));
  if (options.empty()) Fail("a character class matches no character");
  return Alt(std::move(options));
}

Grammar::Node Grammar::TextUntil(std::string_view stop) {
  FISSION_CHECK(!stop.empty());
  Expr e;
  e.kind = Kind::kUntil;
  e.text = std::string(stop);
  return Add(std::move(e));
}

std::int32_t Grammar::AddRule(std::string_view name) {
  std::string unique(name);
  for (int i = 1; FindRule(unique) >= 0; ++i) unique = StrCat(name, "_", i);
  rules_.push_back({std::move(unique), -1});
  return static_cast<std::int32_t>(rules_.size() - 1);
}

std::int32_t Grammar::FindRule(std::string_view name) const {
  for (std::size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<std::int32_t>(i);
  return -1;
}

void Grammar::Define(std::int32_t rule, Node body) {
  FISSION_CHECK(rule >= 0 && rule < num_rules() && body >= 0 && body < num_exprs());
  rules_[rule].body = body;
}

}  // namespace fission::grammar
