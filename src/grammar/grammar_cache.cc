#include "grammar/grammar_cache.h"

namespace fission::grammar {

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocabulary, std::size_t capacity)
    : vocabulary_(std::move(vocabulary)), capacity_(std::max<std::size_t>(capacity, 1)) {}

std::shared_ptr<const CompiledGrammar> GrammarCache::Get(const std::string& kind, const std::string& text,
                                                         const std::function<Grammar()>& build) {
  // The kind's length first, so that no (kind, text) pair can spell another's key.
  const std::string key = std::to_string(kind.size()) + ":" + kind + text;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->second;
    }
    ++misses_;
  }
  auto compiled = std::make_shared<const CompiledGrammar>(build(), vocabulary_);  // outside the lock: it may take a while
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // another thread was first
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  while (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

std::size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

std::int64_t GrammarCache::hits() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hits_;
}

std::int64_t GrammarCache::misses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return misses_;
}

}  // namespace fission::grammar
