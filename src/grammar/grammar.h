// A context-free grammar over bytes, the form every constraint (a regex, an EBNF text, a JSON
// schema, a tool-call format) is written into before it is compiled (automaton.h).
//
// Rules are named; a rule's body is an expression of byte sets, sequences, alternatives, counted
// repetitions and references to rules (by index, so rules may refer to each other before they
// are defined, and recursively). Text is UTF-8: a set of code points becomes the alternatives of
// its UTF-8 byte sequences, so the automata never see anything but bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/byte_set.h"

namespace fission::grammar {

// An inclusive range of Unicode code points.
using CodePointRange = std::pair<char32_t, char32_t>;

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

class Grammar {
 public:
  using Node = std::int32_t;
  enum class Kind : std::uint8_t { kEmpty, kBytes, kSeq, kAlt, kRepeat, kRef, kUntil };
  struct Expr {
    Kind kind = Kind::kEmpty;
    ByteSet bytes;                // kBytes
    std::vector<Node> children;   // kSeq, kAlt; kRepeat: one
    std::int32_t rule = -1;       // kRef
    std::int32_t min = 0, max = 0;  // kRepeat; max -1: unbounded
    std::string text;             // kUntil: the stop text
  };
  struct Rule {
    std::string name;
    Node body = -1;  // -1: not defined yet
  };
  static constexpr std::int32_t kUnbounded = -1;

  // Expressions.
  Node Empty();
  Node Bytes(const ByteSet& set);
  Node Literal(std::string_view text);
  Node Seq(std::vector<Node> parts);
  Node Alt(std::vector<Node> options);
  Node Repeat(Node x, std::int32_t min, std::int32_t max);
  Node Optional(Node x) { return Repeat(x, 0, 1); }
  Node Star(Node x) { return Repeat(x, 0, kUnbounded); }
  Node Plus(Node x) { return Repeat(x, 1, kUnbounded); }
  Node Ref(std::int32_t rule);
  // Any one character whose code point lies in `ranges` (surrogates excluded), as UTF-8.
  Node CodePoints(std::vector<CodePointRange> ranges);
  // Any text that does not contain `stop`, followed by `stop` (the first occurrence ends it).
  Node TextUntil(std::string_view stop);

  // Rules. AddRule makes a new rule (a name already taken gets a numbered suffix).
  std::int32_t AddRule(std::string_view name);
  std::int32_t FindRule(std::string_view name) const;  // -1 when absent
  void Define(std::int32_t rule, Node body);
  void set_root(std::int32_t rule) { root_ = rule; }

  std::int32_t root() const { return root_; }
  const Expr& expr(Node n) const { return exprs_[n]; }
  const Rule& rule(std::int32_t r) const { return rules_[r]; }
  std::int32_t num_rules() const { return static_cast<std::int32_t>(rules_.size()); }
  std::int32_t num_exprs() const { return static_cast<std::int32_t>(exprs_.size()); }

 private:
  Node Add(Expr e);

  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  std::int32_t root_ = -1;
};

// The code points not in `ranges` (within [0, kMaxCodePoint]); `ranges` need not be sorted.
std::vector<CodePointRange> ComplementCodePoints(std::vector<CodePointRange> ranges);
// Appends the UTF-8 encoding of `c`.
void AppendUtf8(char32_t c, std::string* out);

}  // namespace fission::grammar
