// The BPE model of tokenizer.json: a vocabulary, ranked merges, and the options byte_fallback,
// ignore_merges, continuing_subword_prefix, end_of_word_suffix and an unknown token. Results are
// cached per word, so repeated words cost one hash lookup.
#pragma once

#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/json.h"

namespace fission::tokenizer {

// Hash and equality that accept std::string_view lookups into std::string-keyed maps.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringIdMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // `j` is tokenizer.json's "model" object; errors name `where`.
  BpeModel(const Json& j, const std::string& where);

  // Appends the ids of one pre-tokenized word.
  void Tokenize(std::string_view word, std::vector<std::int32_t>* ids) const;

  std::optional<std::int32_t> TokenToId(std::string_view token) const;
  // The token text of `id`, or nullptr when the vocabulary has no such id.
  const std::string* IdToToken(std::int32_t id) const;
  std::int64_t size() const { return static_cast<std::int64_t>(id_to_token_.size()); }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t new_id;
  };
  void MergeWord(std::string_view word, std::vector<std::int32_t>* ids) const;
  const Merge* FindMerge(std::int32_t a, std::int32_t b) const {
    auto it = merges_.find((std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  StringIdMap vocab_;
  std::vector<std::string> id_to_token_;  // indexed by id; holes are empty
  std::vector<bool> has_id_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::optional<std::int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool fuse_unk_ = false;
  std::int32_t byte_ids_[256];  // <0xXX> token ids for byte_fallback, -1 when missing

  static constexpr std::size_t kCacheCapacity = 1 << 18;
  static constexpr std::size_t kMaxCachedWordBytes = 256;
  mutable std::shared_mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace fission::tokenizer
