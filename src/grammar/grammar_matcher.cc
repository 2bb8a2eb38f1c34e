#include "grammar/grammar_matcher.h"

#include <algorithm>

#include "base/error.h"

namespace fission::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), chart_(&grammar_->automaton()) {
  chart_.StartRoot();
}

void GrammarMatcher::FillNextTokenMask(std::span<std::uint32_t> mask) {
  const Vocabulary& vocab = grammar_->vocabulary();
  FISSION_CHECK(mask.size() == MaskWords(vocab.size()), "mask of ", mask.size(), " words for ", vocab.size(), " tokens");
  std::fill(mask.begin(), mask.end(), 0u);
  const Automaton& a = grammar_->automaton();
  states_.clear();
  for (const EarleyItem& item : chart_.current())
    if (a.has_bytes(item.state)) states_.push_back(item.state);
  std::sort(states_.begin(), states_.end());
  states_.erase(std::unique(states_.begin(), states_.end()), states_.end());
  dependent_.clear();
  for (std::int32_t state : states_) {
    const std::shared_ptr<const StateMasks> masks = grammar_->Masks(state);
    masks->AddAccepted(mask);
    dependent_.insert(dependent_.end(), masks->dependent.begin(), masks->dependent.end());
  }
  if (dependent_.empty()) return;
  // The union of the ranges, ascending, then one walk of the whole chart over it.
  std::sort(dependent_.begin(), dependent_.end(),
            [](const PositionRange& x, const PositionRange& y) { return x.begin < y.begin; });
  std::size_t merged = 0;
  for (const PositionRange& r : dependent_) {
    if (merged > 0 && r.begin <= dependent_[merged - 1].end) {
      dependent_[merged - 1].end = std::max(dependent_[merged - 1].end, r.end);
    } else {
      dependent_[merged++] = r;
    }
  }
  dependent_.resize(merged);
  WalkTokens(
      vocab, dependent_, chart_,
      [&](std::int32_t pos) {
        const std::int32_t id = vocab.sorted_id(pos);
        mask[id >> 5] |= 1u << (id & 31);
      },
      [](std::int32_t, std::int32_t, std::int32_t) {});
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  std::size_t pushed = 0;
  while (pushed < bytes.size() && chart_.Push(static_cast<std::uint8_t>(bytes[pushed]))) ++pushed;
  if (pushed == bytes.size()) return true;
  for (; pushed > 0; --pushed) chart_.Pop();
  return false;
}

bool GrammarMatcher::AcceptToken(std::int32_t id) {
  const Vocabulary& vocab = grammar_->vocabulary();
  if (id < 0 || id >= vocab.size() || vocab.bytes(id).empty()) return false;
  return AcceptBytes(vocab.bytes(id));
}

}  // namespace fission::grammar
