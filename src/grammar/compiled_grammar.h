// A grammar compiled for one vocabulary: its automaton, and for each automaton state the tokens
// it accepts on its own, computed the first time a matcher meets the state and kept.
//
// From a state s, a token is accepted regardless of context when its bytes can be read without
// leaving s's rule (calls inside it included); it is context-dependent when the rule may complete
// part-way and the next byte may follow the rule somewhere (Automaton::follow); every other token
// is rejected from s. A matcher's mask is then the union over the states of its current set: the
// accepted tokens of each, plus the context-dependent ones that a walk of the whole chart
// accepts. A regex or a non-recursive schema is one rule, so it has no context-dependent tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/token_walk.h"
#include "grammar/vocabulary.h"

namespace fission::grammar {

// The tokens one state accepts on its own, and those that need the chart.
struct StateMasks {
  std::vector<std::uint32_t> accepted_bits;  // a bit per token id, or empty: then accepted_ids
  std::vector<std::int32_t> accepted_ids;
  std::vector<PositionRange> dependent;  // sorted vocabulary positions
  std::size_t bytes() const;
  // ORs the accepted tokens into `mask` (a bit per token id).
  void AddAccepted(std::span<std::uint32_t> mask) const;
};

class CompiledGrammar {
 public:
  // Throws fission::Error when the grammar cannot be compiled (automaton.h).
  CompiledGrammar(const Grammar& grammar, std::shared_ptr<const Vocabulary> vocabulary,
                  std::size_t mask_cache_bytes = std::size_t{256} << 20);

  const Automaton& automaton() const { return automaton_; }
  const Vocabulary& vocabulary() const { return *vocabulary_; }
  // The masks of `state`, computed on first use (any thread).
  std::shared_ptr<const StateMasks> Masks(std::int32_t state) const;
  // Masks computed so far (statistics), and the bytes the cached ones hold.
  std::int64_t masks_computed() const;
  std::size_t mask_bytes() const;

 private:
  StateMasks Compute(std::int32_t state) const;

  Automaton automaton_;
  std::shared_ptr<const Vocabulary> vocabulary_;
  std::size_t cache_limit_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::int32_t, std::shared_ptr<const StateMasks>> cache_;
  mutable std::size_t cache_bytes_ = 0;
  mutable std::int64_t computed_ = 0;
};

// Words of a token bitmask for a vocabulary of `size` ids.
inline std::size_t MaskWords(std::int64_t size) { return static_cast<std::size_t>((size + 31) / 32); }

}  // namespace fission::grammar
