#include "grammar/grammar_cache.h"

#include <algorithm>

namespace fission::grammar {

GrammarCache::GrammarCache(std::shared_ptr<const Vocabulary> vocabulary, std::size_t capacity, std::size_t mask_bytes)
    : vocabulary_(std::move(vocabulary)), capacity_(std::max<std::size_t>(capacity, 1)), mask_bytes_(mask_bytes) {}

void GrammarCache::EvictLocked() {
  std::size_t bytes = 0;
  for (const Entry& e : lru_) bytes += e.second->mask_bytes();
  while (lru_.size() > 1 && (lru_.size() > capacity_ || bytes > mask_bytes_)) {
    bytes -= lru_.back().second->mask_bytes();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

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
      EvictLocked();
      return lru_.front().second;
    }
    ++misses_;
  }
  auto compiled = std::make_shared<const CompiledGrammar>(build(), vocabulary_);  // outside the lock: it may take a while
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // another thread was first
  lru_.emplace_front(key, compiled);
  index_[key] = lru_.begin();
  EvictLocked();
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
