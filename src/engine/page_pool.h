// The pool of KV cache pages: which pages are free and how many holders each used page has.
//
// A page holds `page_size` consecutive token positions of one sequence in every paged cache class
// and layer of the model's memory (model/memory_spec.h). Holders are sequences (one reference per page of their block table) and the prefix
// cache (one reference per page it keeps). A page returns to the free list when its last holder
// lets it go.
#pragma once

#include <cstdint>
#include <vector>


namespace fission::engine {

class PagePool {
 public:
  explicit PagePool(std::int32_t num_pages);

  std::int32_t num_pages() const { return static_cast<std::int32_t>(ref_counts_.size()); }
  std::int32_t num_free() const { return static_cast<std::int32_t>(free_.size()); }
  std::int32_t num_used() const { return num_pages() - num_free(); }

  // Appends `count` fresh pages (each with one reference) to `out`; all or nothing.
  bool Allocate(std::int32_t count, std::vector<std::int32_t>* out);
  // Adds a holder to a used page.
  void Ref(std::int32_t page);
  // Drops a holder; the page is free again when none is left.
  void Unref(std::int32_t page);
  std::int32_t ref_count(std::int32_t page) const { return ref_counts_[page]; }

 private:
  std::vector<std::int32_t> ref_counts_;
  // Free pages, used as a stack: the most recently freed page is handed out first.
  std::vector<std::int32_t> free_;
};

}  // namespace fission::engine
