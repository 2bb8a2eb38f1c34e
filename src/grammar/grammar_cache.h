// Compiled grammars by (kind, text), shared by every request that asks for the same constraint:
// compiling and the per-state masks happen once. Least recently used entries go beyond `capacity`
// entries or when the masks the entries hold exceed `mask_bytes` (checked at each Get, since masks
// grow while matchers run); matchers keep an evicted grammar alive until they finish.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/compiled_grammar.h"

namespace fission::grammar {

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const Vocabulary> vocabulary, std::size_t capacity = 256,
                        std::size_t mask_bytes = std::size_t{1} << 30);

  // The grammar of (kind, text), built by `build` and compiled on a miss. Errors from either are
  // thrown and nothing is kept. Any thread.
  std::shared_ptr<const CompiledGrammar> Get(const std::string& kind, const std::string& text,
                                             const std::function<Grammar()>& build);

  const std::shared_ptr<const Vocabulary>& vocabulary() const { return vocabulary_; }
  std::size_t size() const;
  std::int64_t hits() const;
  std::int64_t misses() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  std::shared_ptr<const Vocabulary> vocabulary_;
  void EvictLocked();

  std::size_t capacity_;
  std::size_t mask_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  std::int64_t hits_ = 0, misses_ = 0;
};

}  // namespace fission::grammar
