#include "grammar/ebnf_parser.h"

#include <cctype>
#include <map>

#include "base/error.h"

namespace fission::grammar {
namespace {

constexpr std::int32_t kMaxEbnfRepeat = 100000;

bool NameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view text) : s_(text) {}

  Grammar Parse() {
    Skip();
    if (AtEnd()) Error("the grammar is empty");
    while (!AtEnd()) {
      const std::size_t at = pos_;
      const std::string name = Name();
      Skip();
      if (!Eat("::=")) {
        pos_ = at;
        Error(StrCat("expected '::=' after the rule name '", Abbreviate(name), "'"));
      }
      const std::int32_t rule = RuleNamed(name, at);
      if (g_.rule(rule).body >= 0) {
        pos_ = at;
        Error(StrCat("the rule '", Abbreviate(name), "' is defined twice"));
      }
      g_.Define(rule, Alternatives(0));
      Skip();
    }
    for (const auto& [name, first_use] : uses_) {
      if (g_.rule(g_.FindRule(name)).body >= 0) continue;
      pos_ = first_use;
      Error(StrCat("the rule '", Abbreviate(name), "' is used but not defined"));
    }
    const std::int32_t root = g_.FindRule("root");
    if (root < 0 || g_.rule(root).body < 0) Fail("ebnf: the grammar has no rule 'root'");
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  [[noreturn]] void Error(std::string_view what) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    Fail("ebnf: line ", line, " column ", column, ": ", what);
  }
  bool AtEnd() const { return pos_ >= s_.size(); }
  char Peek() const { return s_[pos_]; }
  bool Eat(std::string_view t) {
    if (s_.substr(pos_, t.size()) != t) return false;
    pos_ += t.size();
    return true;
  }
  // Whitespace, newlines and # comments.
  void Skip() {
    while (!AtEnd()) {
      if (std::isspace(static_cast<unsigned char>(Peek()))) {
        ++pos_;
      } else if (Peek() == '#') {
        while (!AtEnd() && Peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string Name() {
    const std::size_t begin = pos_;
    while (!AtEnd() && NameChar(Peek())) ++pos_;
    if (pos_ == begin) Error("expected a rule name");
    return std::string(s_.substr(begin, pos_ - begin));
  }

  std::int32_t RuleNamed(const std::string& name, std::size_t at) {
    std::int32_t r = g_.FindRule(name);
    if (r < 0) r = g_.AddRule(name);
    uses_.emplace(name, at);
    return r;
  }

  // A name followed by ::= starts the next rule.
  bool AtRuleStart() {
    const std::size_t save = pos_;
    while (!AtEnd() && NameChar(Peek())) ++pos_;
    const bool named = pos_ > save;
    Skip();
    const bool start = named && s_.substr(pos_, 3) == "::=";
    pos_ = save;
    return start;
  }

  Grammar::Node Alternatives(int depth) {
    if (depth > 200) Error("groups nested too deeply");
    std::vector<Grammar::Node> options = {Sequence(depth)};
    while (true) {
      Skip();
      if (!Eat("|")) break;
      options.push_back(Sequence(depth));
    }
    return g_.Alt(std::move(options));
  }

  Grammar::Node Sequence(int depth) {
    std::vector<Grammar::Node> parts;
    while (true) {
      Skip();
      if (AtEnd() || Peek() == '|' || Peek() == ')') break;
      if (NameChar(Peek()) && AtRuleStart()) break;
      parts.push_back(Postfix(Primary(depth)));
    }
    return g_.Seq(std::move(parts));
  }

  Grammar::Node Postfix(Grammar::Node x) {
    while (!AtEnd()) {
      const char c = Peek();
      if (c == '*') {
        ++pos_;
        x = g_.Star(x);
      } else if (c == '+') {
        ++pos_;
        x = g_.Plus(x);
      } else if (c == '?') {
        ++pos_;
        x = g_.Optional(x);
      } else if (c == '{') {
        ++pos_;
        const std::int32_t min = Number();
        std::int32_t max = min;
        if (Eat(",")) max = (!AtEnd() && Peek() == '}') ? Grammar::kUnbounded : Number();
        if (!Eat("}")) Error("an unterminated repetition {m,n}");
        if (max != Grammar::kUnbounded && max < min) Error("a repetition {m,n} with n < m");
        x = g_.Repeat(x, min, max);
      } else {
        break;
      }
    }
    return x;
  }

  std::int32_t Number() {
    Skip();
    std::int64_t v = 0;
    const std::size_t begin = pos_;
    while (!AtEnd() && std::isdigit(static_cast<unsigned char>(Peek()))) {
      v = v * 10 + (Peek() - '0');
      if (v > kMaxEbnfRepeat) Error(StrCat("a repetition count above ", kMaxEbnfRepeat));
      ++pos_;
    }
    if (pos_ == begin) Error("expected a number");
    Skip();
    return static_cast<std::int32_t>(v);
  }

  Grammar::Node Primary(int depth) {
    const char c = Peek();
    if (c == '"' || c == '\'') return String(c);
    if (c == '[') return Class();
    if (c == '(') {
      ++pos_;
      const Grammar::Node inner = Alternatives(depth + 1);
      Skip();
      if (!Eat(")")) Error("an unterminated group: expected ')'");
      return inner;
    }
    if (NameChar(c)) {
      const std::size_t at = pos_;
      return g_.Ref(RuleNamed(Name(), at));
    }
    Error(StrCat("unexpected '", std::string(1, c), "'"));
  }

  char32_t Hex(int digits) {
    char32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (AtEnd() || !std::isxdigit(static_cast<unsigned char>(Peek()))) Error("a malformed hex escape");
      const char h = Peek();
      v = v * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
      ++pos_;
    }
    if (v > kMaxCodePoint) Error("an escape beyond U+10FFFF");
    return v;
  }

  // One character of a string or class (UTF-8 or an escape).
  char32_t Char() {
    if (Peek() == '\\') {
      ++pos_;
      if (AtEnd()) Error("an unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case 'x': return Hex(2);
        case 'u': return Hex(4);
        case 'U': return Hex(8);
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
          return static_cast<unsigned char>(e);
        default:
          --pos_;
          Error(StrCat("an unknown escape '\\", std::string(1, e), "'"));
      }
    }
    const unsigned char b = static_cast<unsigned char>(Peek());
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > s_.size()) Error("invalid UTF-8");
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int i = 1; i < len; ++i) c = (c << 6) | (static_cast<unsigned char>(s_[pos_ + i]) & 0x3F);
    pos_ += len;
    return c;
  }

  Grammar::Node String(char quote) {
    ++pos_;
    std::string text;
    while (true) {
      if (AtEnd() || Peek() == '\n') Error("an unterminated string");
      if (Peek() == quote) break;
      AppendUtf8(Char(), &text);
    }
    ++pos_;
    return g_.Literal(text);
  }

  Grammar::Node Class() {
    ++pos_;
    const bool negated = !AtEnd() && Peek() == '^' && (++pos_, true);
    std::vector<CodePointRange> ranges;
    while (true) {
      if (AtEnd()) Error("an unterminated character class");
      if (Peek() == ']') break;
      const char32_t lo = Char();
      char32_t hi = lo;
      if (pos_ + 1 < s_.size() && Peek() == '-' && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = Char();
        if (hi < lo) Error("a class range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    if (negated) ranges = ComplementCodePoints(std::move(ranges));
    if (ranges.empty()) Error("a character class that matches nothing");
    return g_.CodePoints(std::move(ranges));
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  Grammar g_;
  std::map<std::string, std::size_t> uses_;  // rule -> offset of its first mention
};

}  // namespace

Grammar ParseEbnf(std::string_view text) { return EbnfParser(text).Parse(); }

}  // namespace fission::grammar
