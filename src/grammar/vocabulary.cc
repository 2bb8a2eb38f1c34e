#include "grammar/vocabulary.h"

#include <algorithm>
#include <limits>

namespace fission::grammar {

Vocabulary::Vocabulary(std::vector<std::string> token_bytes) : bytes_(std::move(token_bytes)) {
  for (std::size_t id = 0; id < bytes_.size(); ++id) {
    if (bytes_[id].empty()) continue;
    sorted_.push_back(static_cast<std::int32_t>(id));
    max_bytes_ = std::max(max_bytes_, static_cast<std::int32_t>(bytes_[id].size()));
  }
  std::sort(sorted_.begin(), sorted_.end(), [this](std::int32_t a, std::int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  const std::int32_t n = num_sorted();
  sorted_offset_.assign(1, 0);
  for (std::int32_t id : sorted_) {
    sorted_data_ += bytes_[id];
    sorted_offset_.push_back(static_cast<std::uint32_t>(sorted_data_.size()));
  }
  lcp_.assign(n, 0);
  for (std::int32_t i = 1; i < n; ++i) {
    const std::string_view a = sorted_bytes(i - 1), b = sorted_bytes(i);
    std::size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    lcp_[i] = static_cast<std::int32_t>(l);
  }
  while (leaves_ < std::max(n, 1)) leaves_ *= 2;
  min_tree_.assign(2 * static_cast<std::size_t>(leaves_), std::numeric_limits<std::int32_t>::max());
  for (std::int32_t i = 0; i < n; ++i) min_tree_[leaves_ + i] = lcp_[i];
  for (std::int32_t i = leaves_ - 1; i > 0; --i) min_tree_[i] = std::min(min_tree_[2 * i], min_tree_[2 * i + 1]);
}

// The first index in [from, hi) of the node's range [lo, hi) whose lcp is below `bound`, or -1.
std::int32_t Vocabulary::FindBelow(std::size_t node, std::int32_t lo, std::int32_t hi, std::int32_t from,
                                   std::int32_t bound) const {
  if (hi <= from || min_tree_[node] >= bound) return -1;
  if (hi - lo == 1) return lo;
  const std::int32_t mid = lo + (hi - lo) / 2;
  const std::int32_t left = FindBelow(2 * node, lo, mid, from, bound);
  return left >= 0 ? left : FindBelow(2 * node + 1, mid, hi, from, bound);
}

std::int32_t Vocabulary::RunEnd(std::int32_t pos, std::int32_t len) const {
  const std::int32_t n = num_sorted();
  if (pos + 1 >= n) return n;
  if (lcp_[pos + 1] < len) return pos + 1;  // the usual case: the run ends at once
  const std::int32_t j = FindBelow(1, 0, leaves_, pos + 1, len);
  return j < 0 || j > n ? n : j;
}

}  // namespace fission::grammar
