// The vocabulary a grammar is matched against: the bytes each token id adds to the text (empty for
// tokens that are not text: special tokens, unused ids). Tokens are kept sorted by their bytes,
// so that tokens sharing a prefix are neighbours: a walk over them (token_walk.h) reads a shared
// prefix once, and skips every token under a prefix that failed in one step (RunEnd).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fission::grammar {

class Vocabulary {
 public:
  // `token_bytes[id]` is token id's bytes; its size is the model's vocabulary (the mask width).
  explicit Vocabulary(std::vector<std::string> token_bytes);

  std::int32_t size() const { return static_cast<std::int32_t>(bytes_.size()); }
  const std::string& bytes(std::int32_t id) const { return bytes_[id]; }
  // Tokens with bytes, in byte order.
  std::int32_t num_sorted() const { return static_cast<std::int32_t>(sorted_.size()); }
  std::int32_t sorted_id(std::int32_t pos) const { return sorted_[pos]; }
  std::string_view sorted_bytes(std::int32_t pos) const {
    return std::string_view(sorted_data_).substr(sorted_offset_[pos], sorted_offset_[pos + 1] - sorted_offset_[pos]);
  }
  // The common prefix length of sorted positions pos - 1 and pos (0 for pos 0).
  std::int32_t lcp(std::int32_t pos) const { return lcp_[pos]; }
  // The first position after `pos` whose token does not start with the first `len` bytes of
  // sorted_bytes(pos) (num_sorted() when every later one does).
  std::int32_t RunEnd(std::int32_t pos, std::int32_t len) const;
  // The longest token, in bytes.
  std::int32_t max_token_bytes() const { return max_bytes_; }

 private:
  std::int32_t FindBelow(std::size_t node, std::int32_t lo, std::int32_t hi, std::int32_t from, std::int32_t bound) const;

  std::vector<std::string> bytes_;
  std::vector<std::int32_t> sorted_;
  // The sorted tokens' bytes back to back, so that a walk reads memory in order.
  std::string sorted_data_;
  std::vector<std::uint32_t> sorted_offset_;
  std::vector<std::int32_t> lcp_;
  std::vector<std::int32_t> min_tree_;  // segment tree of lcp_ minima
  std::int32_t leaves_ = 1;
  std::int32_t max_bytes_ = 0;
};

}  // namespace fission::grammar
