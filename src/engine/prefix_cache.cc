#include "engine/prefix_cache.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "base/error.h"

namespace fission::engine {

namespace {

struct TokensHash {
  std::size_t operator()(const std::vector<std::int32_t>& tokens) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull;
    for (std::int32_t t : tokens) {
      h ^= static_cast<std::uint32_t>(t);
      h *= 0x100000001b3ull;
      h ^= h >> 29;
    }
    return static_cast<std::size_t>(h);
  }
};

}  // namespace

struct PrefixCache::Node {
  std::vector<std::int32_t> tokens;
  std::int32_t page = -1;
  Node* parent = nullptr;
  std::uint64_t last_used = 0;
  std::unordered_map<std::vector<std::int32_t>, std::unique_ptr<Node>, TokensHash> children;
};

PrefixCache::PrefixCache(PagePool* pool, std::int32_t page_size)
    : pool_(pool), page_size_(page_size), root_(std::make_unique<Node>()) {
  FISSION_CHECK(page_size >= 1);
}

PrefixCache::~PrefixCache() {
  // Return the tree's references so that the pool balances if it outlives the cache.
  ForEachPage([this](std::int32_t page) { pool_->Unref(page); });
}

void PrefixCache::Touch(Node* node) { node->last_used = ++clock_; }

PrefixCache::Match PrefixCache::MatchPrefix(const std::int32_t* tokens, std::int32_t num_tokens) {
  Match match;
  Node* node = root_.get();
  std::vector<std::int32_t> key(page_size_);
  for (std::int32_t start = 0; start + page_size_ <= num_tokens; start += page_size_) {
    key.assign(tokens + start, tokens + start + page_size_);
    auto it = node->children.find(key);
    if (it == node->children.end()) break;
    node = it->second.get();
    Touch(node);
    match.pages.push_back(node->page);
  }
  match.last = node;
  return match;
}

PrefixCache::Node* PrefixCache::Insert(Node* parent, const std::int32_t* tokens, std::vector<std::int32_t>& pages,
                                       std::int32_t begin_page, std::int32_t end_page) {
  FISSION_CHECK(parent != nullptr && begin_page >= 0 && end_page <= static_cast<std::int32_t>(pages.size()));
  Node* node = parent;
  for (std::int32_t i = begin_page; i < end_page; ++i) {
    std::vector<std::int32_t> key(tokens + static_cast<std::int64_t>(i) * page_size_,
                                  tokens + static_cast<std::int64_t>(i + 1) * page_size_);
    auto it = node->children.find(key);
    if (it != node->children.end()) {
      Node* child = it->second.get();
      if (child->page != pages[i]) {
        pool_->Ref(child->page);
        pool_->Unref(pages[i]);
        pages[i] = child->page;
      }
      node = child;
      Touch(node);
      continue;
    }
    auto child = std::make_unique<Node>();
    child->tokens = key;
    child->page = pages[i];
    child->parent = node;
    pool_->Ref(pages[i]);
    ++num_nodes_;
    Node* raw = child.get();
    node->children.emplace(std::move(key), std::move(child));
    node = raw;
    Touch(node);
  }
  return node;
}

std::int32_t PrefixCache::Evict(std::int32_t num_pages) {
  if (num_pages <= 0 || num_nodes_ == 0) return 0;
  using Entry = std::pair<std::uint64_t, Node*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> leaves;
  std::vector<Node*> stack = {root_.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (auto& [key, child] : node->children) stack.push_back(child.get());
    if (node != root_.get() && node->children.empty() && pool_->ref_count(node->page) == 1)
      leaves.emplace(node->last_used, node);
  }
  std::int32_t freed = 0;
  while (freed < num_pages && !leaves.empty()) {
    Node* node = leaves.top().second;
    leaves.pop();
    Node* parent = node->parent;
    // Only the nodes a match or an insert walks are stamped; a parent inherits its children's use.
    parent->last_used = std::max(parent->last_used, node->last_used);
    pool_->Unref(node->page);
    ++freed;
    --num_nodes_;
    const std::vector<std::int32_t> key = node->tokens;
    parent->children.erase(key);  // destroys node
    if (parent != root_.get() && parent->children.empty() && pool_->ref_count(parent->page) == 1)
      leaves.emplace(parent->last_used, parent);
  }
  return freed;
}

std::int32_t PrefixCache::CountEvictable() const {
  std::int32_t count = 0;
  ForEachPage([&](std::int32_t page) { count += pool_->ref_count(page) == 1; });
  return count;
}

void PrefixCache::ForEachPage(const std::function<void(std::int32_t)>& fn) const {
  std::vector<const Node*> stack = {root_.get()};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    if (node != root_.get()) fn(node->page);
    for (const auto& [key, child] : node->children) stack.push_back(child.get());
  }
}

}  // namespace fission::engine
