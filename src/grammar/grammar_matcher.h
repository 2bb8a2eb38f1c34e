// One output's position in a compiled grammar: which tokens may come next (a bitmask over the
// vocabulary), and advancing by the token that was chosen. A matcher is used by one thread at a
// time; matchers of one CompiledGrammar share its per-state masks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/earley_chart.h"

namespace fission::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);

  // Sets bit t (word t / 32, bit t % 32) of `mask` exactly for the tokens whose bytes keep the
  // output a valid prefix; `mask` has MaskWords(vocabulary size) words. End-of-sequence tokens are
  // not the grammar's: IsComplete says when the output may end.
  void FillNextTokenMask(std::span<std::uint32_t> mask);
  // Advances by a token (false, and no change, when its bytes are not a valid continuation).
  bool AcceptToken(std::int32_t id);
  bool AcceptBytes(std::string_view bytes);
  // The output so far is a complete sentence of the grammar.
  bool IsComplete() const { return chart_.RootComplete(); }
  // Complete, and no byte may follow.
  bool IsTerminated() const { return !chart_.CanScan(); }
  // Bytes accepted so far.
  std::int32_t bytes_accepted() const { return chart_.depth(); }
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  EarleyChart chart_;
  std::vector<std::int32_t> states_;  // scratch: distinct scanning states of the current set
  std::vector<PositionRange> dependent_;
};

}  // namespace fission::grammar
