#include "grammar/regex_parser.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "grammar/json_text.h"

namespace fission::grammar {
namespace {

using Ranges = std::vector<CodePointRange>;

constexpr std::int32_t kMaxRepeat = 100000;

const Ranges& DigitRanges() {
  static const Ranges r = {{'0', '9'}};
  return r;
}
const Ranges& WordRanges() {
  static const Ranges r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
// ECMAScript's white space and line terminators.
const Ranges& SpaceRanges() {
  static const Ranges r = {{'\t', '\r'}, {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                           {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  return r;
}

class RegexParser {
 public:
  RegexParser(std::string_view text, Grammar* g, const RegexOptions& options) : s_(text), g_(g), options_(options) {}

  Grammar::Node Parse() {
    const Grammar::Node n = Alternation(0);
    if (pos_ < s_.size()) Error(s_[pos_] == ')' ? "an unmatched ')'" : "unexpected text");
    return n;
  }

 private:
  [[noreturn]] void Error(std::string_view what) const {
    Fail("regex: ", what, " at offset ", pos_, " of '", Abbreviate(s_), "'");
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return s_[pos_]; }
  bool Eat(char c) {
    if (AtEnd() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  Grammar::Node Alternation(int depth) {
    if (depth > 200) Error("groups nested too deeply");
    std::vector<Grammar::Node> options = {Concat(depth)};
    while (Eat('|')) options.push_back(Concat(depth));
    return g_->Alt(std::move(options));
  }

  Grammar::Node Concat(int depth) {
    std::vector<Grammar::Node> parts;
    if (depth == 0 && parts.empty()) Eat('^');  // the whole text matches anyway
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$') {
        ++pos_;
        if (depth == 0 && (AtEnd() || Peek() == '|')) break;
        --pos_;
        Error("'$' before the end of the pattern (anchors are only supported at its ends)");
      }
      if (Peek() == '^') Error("'^' after the start of the pattern (anchors are only supported at its ends)");
      parts.push_back(Quantified(depth));
    }
    return g_->Seq(std::move(parts));
  }

  Grammar::Node Quantified(int depth) {
    Grammar::Node atom = Atom(depth);
    while (!AtEnd()) {
      std::int32_t min = 0, max = 0;
      const char c = Peek();
      if (c == '*') {
        min = 0, max = Grammar::kUnbounded;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = Grammar::kUnbounded;
        ++pos_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '{' && CountedAhead()) {
        ++pos_;
        Counted(&min, &max);
      } else {
        break;
      }
      if (Eat('?')) {
        // lazy: the same language
      } else if (!AtEnd() && Peek() == '+') {
        Error("possessive quantifiers are not supported");
      }
      atom = g_->Repeat(atom, min, max);
    }
    return atom;
  }

  // `{` starts a quantifier only as {n}, {n,} or {n,m}; otherwise it is a literal brace.
  bool CountedAhead() const {
    std::size_t i = pos_ + 1;
    const std::size_t digits = i;
    while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') ++i;
    if (i == digits) return false;
    if (i < s_.size() && s_[i] == '}') return true;
    if (i >= s_.size() || s_[i] != ',') return false;
    ++i;
    while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') ++i;
    return i < s_.size() && s_[i] == '}';
  }

  std::int32_t Number() {
    std::int64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxRepeat) Error(StrCat("a repetition count above ", kMaxRepeat));
      ++pos_;
    }
    return static_cast<std::int32_t>(v);
  }

  void Counted(std::int32_t* min, std::int32_t* max) {
    *min = Number();
    *max = *min;
    if (Eat(',')) *max = (!AtEnd() && Peek() == '}') ? Grammar::kUnbounded : Number();
    if (!Eat('}')) Error("an unterminated quantifier");
    if (*max != Grammar::kUnbounded && *max < *min) Error("a quantifier {n,m} with m < n");
  }

  Grammar::Node Atom(int depth) {
    const char c = Peek();
    if (c == '(') return Group(depth);
    if (c == '[') return Chars(Class());
    if (c == '.') {
      ++pos_;
      return Chars(ComplementCodePoints({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '\\') return Escape();
    if (c == '*' || c == '+' || c == '?') Error("a quantifier with nothing to repeat");
    return Chars({{NextCodePoint(), 0}}, true);
  }

  Grammar::Node Group(int depth) {
    const std::size_t open = pos_;
    auto unsupported = [&](const char* what) {
      pos_ = open;  // errors point at the group
      Error(what);
    };
    ++pos_;
    if (Eat('?')) {
      if (Eat(':')) {
      } else if (s_.substr(pos_, 2) == "<=" || s_.substr(pos_, 2) == "<!") {
        unsupported("lookbehind is not supported");
      } else if (Eat('<') || (s_.substr(pos_, 2) == "P<" && (pos_ += 2))) {
        while (!AtEnd() && Peek() != '>') ++pos_;
        if (!Eat('>')) unsupported("an unterminated group name");
      } else if (!AtEnd() && (Peek() == '=' || Peek() == '!')) {
        unsupported("lookahead is not supported");
      } else {
        unsupported("group flags are not supported");
      }
    }
    const Grammar::Node inner = Alternation(depth + 1);
    if (!Eat(')')) unsupported("an unterminated group");
    return inner;
  }

  // The code point at pos_ (UTF-8), advancing past it.
  char32_t NextCodePoint() {
    const unsigned char b = static_cast<unsigned char>(s_[pos_]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > s_.size()) Error("invalid UTF-8");
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const unsigned char cont = static_cast<unsigned char>(s_[pos_ + i]);
      if ((cont >> 6) != 2) Error("invalid UTF-8");
      c = (c << 6) | (cont & 0x3F);
    }
    pos_ += len;
    return c;
  }

  char32_t Hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (AtEnd() || !std::isxdigit(static_cast<unsigned char>(Peek()))) Error("a malformed hex escape");
      const char h = Peek();
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_;
    }
    return v;
  }

  // An escape inside or outside a class: one code point, or a class (\d \w \s and negations).
  Ranges EscapeRanges(bool in_class) {
    if (pos_ + 1 >= s_.size()) Error("a pattern ending in '\\'");
    ++pos_;  // the backslash
    const char c = s_[pos_++];
    switch (c) {
      case 'd': return DigitRanges();
      case 'D': return ComplementCodePoints(DigitRanges());
      case 'w': return WordRanges();
      case 'W': return ComplementCodePoints(WordRanges());
      case 's': return SpaceRanges();
      case 'S': return ComplementCodePoints(SpaceRanges());
      case 'n': return {{'\n', '\n'}};
      case 'r': return {{'\r', '\r'}};
      case 't': return {{'\t', '\t'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': {
        const char32_t v = Hex(2);
        return {{v, v}};
      }
      case 'u': {
        char32_t v;
        if (Eat('{')) {
          v = 0;
          int digits = 0;
          while (!AtEnd() && Peek() != '}') {
            v = v * 16 + Hex(1);
            if (++digits > 6) Error("a malformed \\u{...} escape");
          }
          if (!Eat('}') || v > kMaxCodePoint) Error("a malformed \\u{...} escape");
        } else {
          v = Hex(4);
        }
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        --pos_;
        Error("word boundaries (\\b) are not supported");
      case 'B':
        --pos_;
        Error("word boundaries (\\B) are not supported");
      case 'p':
      case 'P':
        --pos_;
        Error("Unicode property classes are not supported");
      case 'k':
        --pos_;
        Error("backreferences are not supported");
      default:
        break;
    }
    if (c >= '1' && c <= '9') {
      --pos_;
      Error("backreferences are not supported");
    }
    if (std::isalnum(static_cast<unsigned char>(c))) {
      --pos_;
      Error(StrCat("an unknown escape '\\", c, "'"));
    }
    --pos_;
    const char32_t cp = NextCodePoint();  // escaped punctuation stands for itself
    return {{cp, cp}};
  }

  Grammar::Node Escape() { return Chars(EscapeRanges(false)); }

  Ranges Class() {
    ++pos_;  // '['
    const bool negated = Eat('^');
    Ranges out;
    bool first = true;
    while (true) {
      if (AtEnd()) Error("an unterminated character class");
      if (Peek() == ']' && !first) break;
      first = false;
      Ranges item = ClassAtom();
      // A range a-b between two single characters.
      if (item.size() == 1 && item[0].first == item[0].second && pos_ + 1 < s_.size() && Peek() == '-' &&
          s_[pos_ + 1] != ']') {
        ++pos_;
        const Ranges hi = ClassAtom();
        if (hi.size() != 1 || hi[0].first != hi[0].second) Error("a class range ending in a class");
        if (hi[0].first < item[0].first) Error("a class range out of order");
        item = {{item[0].first, hi[0].first}};
      }
      out.insert(out.end(), item.begin(), item.end());
    }
    ++pos_;  // ']'
    return negated ? ComplementCodePoints(out) : out;
  }

  Ranges ClassAtom() {
    if (Peek() == '\\') return EscapeRanges(true);
    if (Peek() == '[' && pos_ + 1 < s_.size() && s_[pos_ + 1] == ':') Error("POSIX classes are not supported");
    const char32_t c = NextCodePoint();
    return {{c, c}};
  }

  // One character of `ranges` (a literal when `single`: ranges[0].first alone).
  Grammar::Node Chars(Ranges ranges, bool single = false) {
    if (single) ranges = {{ranges[0].first, ranges[0].first}};
    if (options_.json_string) return JsonStringChars(ranges, g_);
    return g_->CodePoints(std::move(ranges));
  }

  std::string_view s_;
  Grammar* g_;
  RegexOptions options_;
  std::size_t pos_ = 0;
};

}  // namespace

Grammar::Node ParseRegex(std::string_view pattern, Grammar* g, const RegexOptions& options) {
  return RegexParser(pattern, g, options).Parse();
}

Grammar RegexGrammar(std::string_view pattern) {
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  g.Define(root, ParseRegex(pattern, &g));
  g.set_root(root);
  return g;
}

}  // namespace fission::grammar
