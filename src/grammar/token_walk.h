// A walk of a chart over tokens in byte order: each token's bytes are pushed onto the chart and
// popped back, a prefix shared with the previous token is read once, and when a byte fails every
// token under that prefix is skipped in one step (Vocabulary::RunEnd).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string_view>

#include "grammar/earley_chart.h"
#include "grammar/vocabulary.h"

namespace fission::grammar {

// Sorted vocabulary positions [begin, end).
struct PositionRange {
  std::int32_t begin;
  std::int32_t end;
};

inline std::int32_t CommonPrefix(std::string_view a, std::string_view b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return static_cast<std::int32_t>(n);
}

// Calls accepted(pos) for each token of `ranges` (ascending, disjoint) whose every byte the
// chart reads, and dead(begin, end, depth) for each run of tokens [begin, end) that share a prefix
// of depth + 1 bytes whose last byte the chart does not read; meanwhile the chart holds their
// first `depth` bytes (sets depth() - depth .. depth() of the chart). The chart is left as found.
template <typename Accepted, typename Dead>
void WalkTokens(const Vocabulary& vocab, std::span<const PositionRange> ranges, EarleyChart& chart,
                Accepted&& accepted, Dead&& dead) {
  std::int32_t pushed = 0;  // bytes of `prev` on the chart
  std::string_view prev;
  std::int32_t prev_pos = -2;
  for (const PositionRange& range : ranges) {
    for (std::int32_t pos = range.begin; pos < range.end;) {
      const std::string_view token = vocab.sorted_bytes(pos);
      const std::int32_t len = static_cast<std::int32_t>(token.size());
      const std::int32_t common = std::min(pos == prev_pos + 1 ? vocab.lcp(pos) : CommonPrefix(prev, token), pushed);
      for (; pushed > common; --pushed) chart.Pop();
      while (pushed < len && chart.Push(static_cast<std::uint8_t>(token[pushed]))) ++pushed;
      prev = token;
      if (pushed == len) {
        accepted(pos);
        prev_pos = pos++;
        continue;
      }
      const std::int32_t end = std::min(range.end, vocab.RunEnd(pos, pushed + 1));
      dead(pos, end, pushed);
      // Every token of the run shares prev's first pushed + 1 bytes, so lcp(end) capped at
      // `pushed` is the common prefix with prev as well.
      prev_pos = end - 1;
      pos = end;
    }
  }
  for (; pushed > 0; --pushed) chart.Pop();
}

}  // namespace fission::grammar
