#include "grammar/compiled_grammar.h"

#include <algorithm>

namespace fission::grammar {

std::size_t StateMasks::bytes() const {
  return sizeof(StateMasks) + accepted_bits.size() * sizeof(std::uint32_t) +
         accepted_ids.size() * sizeof(std::int32_t) + dependent.size() * sizeof(PositionRange);
}

void StateMasks::AddAccepted(std::span<std::uint32_t> mask) const {
  if (!accepted_bits.empty()) {
    for (std::size_t i = 0; i < accepted_bits.size(); ++i) mask[i] |= accepted_bits[i];
    return;
  }
  for (std::int32_t id : accepted_ids) mask[id >> 5] |= 1u << (id & 31);
}

CompiledGrammar::CompiledGrammar(const Grammar& grammar, std::shared_ptr<const Vocabulary> vocabulary,
                                 std::size_t mask_cache_bytes)
    : automaton_(Automaton::Compile(grammar)), vocabulary_(std::move(vocabulary)), cache_limit_(mask_cache_bytes) {}

std::shared_ptr<const StateMasks> CompiledGrammar::Masks(std::int32_t state) const {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find(state);
    if (it != cache_.end()) return it->second;
  }
  auto masks = std::make_shared<const StateMasks>(Compute(state));
  std::lock_guard<std::mutex> lock(mutex_);
  ++computed_;
  // Over the budget the cache starts again: entries in use stay alive through their pointers.
  if (cache_bytes_ + masks->bytes() > cache_limit_) {
    cache_.clear();
    cache_bytes_ = 0;
  }
  auto [it, fresh] = cache_.emplace(state, masks);
  if (fresh) cache_bytes_ += masks->bytes();
  return it->second;
}

std::int64_t CompiledGrammar::masks_computed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return computed_;
}

std::size_t CompiledGrammar::mask_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_bytes_;
}

StateMasks CompiledGrammar::Compute(std::int32_t state) const {
  const Vocabulary& vocab = *vocabulary_;
  EarleyChart chart(&automaton_);
  chart.StartFrame(state);
  const ByteSet& follow = automaton_.follow(automaton_.rule_of(state));
  StateMasks out;
  const PositionRange all[] = {{0, vocab.num_sorted()}};
  WalkTokens(
      vocab, all, chart, [&](std::int32_t pos) { out.accepted_ids.push_back(vocab.sorted_id(pos)); },
      [&](std::int32_t begin, std::int32_t end, std::int32_t depth) {
        if (follow.Empty()) return;
        const std::string_view token = vocab.sorted_bytes(begin);
        const std::int32_t base = chart.depth() - depth;
        for (std::int32_t d = 0; d <= depth; ++d) {
          if (!chart.escaped(base + d) || !follow.Has(static_cast<std::uint8_t>(token[d]))) continue;
          if (!out.dependent.empty() && out.dependent.back().end == begin) {
            out.dependent.back().end = end;
          } else {
            out.dependent.push_back({begin, end});
          }
          return;
        }
      });
  // A dense mask once it is smaller than the list.
  if (out.accepted_ids.size() * 32 > static_cast<std::size_t>(vocab.size())) {
    out.accepted_bits.assign(MaskWords(vocab.size()), 0);
    for (std::int32_t id : out.accepted_ids) out.accepted_bits[id >> 5] |= 1u << (id & 31);
    out.accepted_ids.clear();
    out.accepted_ids.shrink_to_fit();
  }
  return out;
}

}  // namespace fission::grammar
