// Added tokens (special or not) are found in the text before pre-tokenization, leftmost-longest,
// with the lstrip/rstrip/single_word options. Tokens marked `normalized` are matched in the
// normalized text, the others in the raw text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json.h"
#include "tokenizer/normalizers.h"

namespace fission::tokenizer {

struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = false;
  bool normalized = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

// A segment of the input: either text still to tokenize or an added token.
struct Segment {
  std::string text;
  std::int32_t token_id = -1;  // >= 0 for an added token
  bool at_start = false;       // begins at offset 0 of the input
};

class AddedVocabulary {
 public:
  // `normalizer` (may be null) gives the matching form of normalized tokens; it must outlive this.
  AddedVocabulary(const Json& added_tokens, const Normalizer* normalizer, const std::string& where);

  // Cuts `text` into segments and normalizes the text segments.
  std::vector<Segment> Split(std::string_view text) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* FindById(std::int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;

 private:
  // A byte trie over token patterns, matched leftmost-longest.
  struct Trie {
    std::vector<std::unordered_map<unsigned char, std::int32_t>> children{1};
    std::vector<std::int32_t> token{-1};  // index into tokens_ of the pattern ending here
    bool first_byte[256] = {};
    bool empty = true;
    void Insert(std::string_view pattern, std::int32_t token_index);
    // Longest pattern that starts at `pos`: its token index and end, or {-1, pos}.
    std::pair<std::int32_t, std::size_t> LongestAt(std::string_view text, std::size_t pos) const;
  };
  void SplitWith(const Trie& trie, std::string_view text, bool at_start, bool normalize,
                 std::vector<Segment>* out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::int32_t, std::size_t> by_id_;
  std::unordered_map<std::string, std::size_t> by_content_;
  const Normalizer* normalizer_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace fission::tokenizer
