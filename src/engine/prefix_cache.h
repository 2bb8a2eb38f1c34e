// The prefix cache: a radix tree over full pages of token ids.
//
// Each node below the root stands for one full page: the `page_size` token ids it holds and the KV
// page that holds their rows, reached by the path of pages before it. The tree keeps one pool
// reference on every page it holds. A sequence that reuses a cached prefix takes its own reference
// on each page of the path, so a page with a reference count of 1 is held by the tree alone: such a
// page, at a leaf, may be evicted, least recently used first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/page_pool.h"

namespace fission::engine {

class PrefixCache {
 public:
  struct Node;

  PrefixCache(PagePool* pool, std::int32_t page_size);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  struct Match {
    std::vector<std::int32_t> pages;  // the cached pages of the longest prefix, in order
    Node* last = nullptr;             // the node of the last matched page (the root if none)
  };
  // The longest cached prefix of whole pages of `tokens[0, num_tokens)`. Marks the matched pages
  // as used now. Takes no references: the caller Refs the pages it keeps.
  Match MatchPrefix(const std::int32_t* tokens, std::int32_t num_tokens);

  // Adds the pages [begin_page, end_page) of a sequence below `parent` (the node of page
  // begin_page - 1, or root() for 0). `tokens` are the sequence's token ids from position 0 and
  // `pages` its block table, of which the sequence holds one reference per page. Where a page's
  // tokens are already cached under another page, the sequence switches to the cached page (same
  // tokens at the same positions, so the same rows) and drops its own. Returns the node of page
  // end_page - 1.
  Node* Insert(Node* parent, const std::int32_t* tokens, std::vector<std::int32_t>& pages,
               std::int32_t begin_page, std::int32_t end_page);

  // Frees up to `num_pages` pages held by the tree alone, least recently used leaves first.
  // Returns the number freed.
  std::int32_t Evict(std::int32_t num_pages);

  Node* root() { return root_.get(); }
  std::int32_t num_pages() const { return num_nodes_; }
  // Pages held by the tree alone (evictable now or after their descendants).
  std::int32_t CountEvictable() const;
  // Calls `fn(page)` for every page the tree holds.
  void ForEachPage(const std::function<void(std::int32_t)>& fn) const;

 private:
  void Touch(Node* node);

  PagePool* pool_;
  std::int32_t page_size_;
  std::unique_ptr<Node> root_;
  std::int32_t num_nodes_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace fission::engine
