// A compiled grammar: one deterministic automaton per rule over byte classes, whose states may
// also call other rules (a recursive transition network). The Earley chart (earley_chart.h) runs
// it; everything that does not recurse is inlined into its caller first, so a regex or a
// non-recursive JSON schema becomes a single automaton that needs no stack at all.
//
// States are numbered across rules: a state's rule is rule_of(state). Every state can still
// reach acceptance (states and rules that cannot are removed), so a live Earley item always has
// a completion: a non-empty chart set means the bytes so far are a valid prefix.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/byte_set.h"
#include "grammar/grammar.h"

namespace fission::grammar {

struct AutomatonLimits {
  std::int32_t max_nfa_states = 1'000'000;
  std::int32_t max_dfa_states = 200'000;
  // A non-recursive rule whose expansion has more NFA states than this stays a call.
  std::int32_t inline_budget = 200'000;
};

class Automaton {
 public:
  struct Call {
    std::int32_t rule;
    std::int32_t target;  // the caller's state once the callee completes
  };

  // Throws fission::Error: an undefined or missing root rule, a grammar that matches nothing,
  // one over the limits.
  static Automaton Compile(const Grammar& grammar, const AutomatonLimits& limits = {});

  std::int32_t num_states() const { return static_cast<std::int32_t>(rule_of_.size()); }
  std::int32_t num_rules() const { return static_cast<std::int32_t>(rule_start_.size()); }
  std::int32_t root() const { return root_; }
  // The state after reading `byte` in `state`, or -1.
  std::int32_t Next(std::int32_t state, std::uint8_t byte) const {
    return next_[static_cast<std::size_t>(state) * num_classes_ + byte_class_[byte]];
  }
  bool accepting(std::int32_t state) const { return accepting_[state]; }
  bool has_bytes(std::int32_t state) const { return has_bytes_[state]; }
  std::span<const Call> calls(std::int32_t state) const {
    return {calls_.data() + call_begin_[state], calls_.data() + call_begin_[state + 1]};
  }
  std::int32_t rule_of(std::int32_t state) const { return rule_of_[state]; }
  std::int32_t rule_start(std::int32_t rule) const { return rule_start_[rule]; }
  // The rule derives the empty text.
  bool nullable(std::int32_t rule) const { return nullable_[rule]; }
  // Bytes that may follow a completion of the rule in some context.
  const ByteSet& follow(std::int32_t rule) const { return follow_[rule]; }
  std::int32_t num_classes() const { return num_classes_; }

 private:
  friend class AutomatonBuilder;
  std::uint8_t byte_class_[256] = {};
  std::int32_t num_classes_ = 0;
  std::vector<std::int32_t> next_;  // [state][class]
  std::vector<std::uint8_t> accepting_, has_bytes_;
  std::vector<std::int32_t> call_begin_;
  std::vector<Call> calls_;
  std::vector<std::int32_t> rule_of_;
  std::vector<std::int32_t> rule_start_;
  std::vector<std::uint8_t> nullable_;
  std::vector<ByteSet> follow_;
  std::int32_t root_ = 0;
};

}  // namespace fission::grammar
