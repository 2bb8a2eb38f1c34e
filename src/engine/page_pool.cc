#include "engine/page_pool.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace fission::engine {

PagePool::PagePool(std::int32_t num_pages) : ref_counts_(num_pages, 0) {
  FISSION_CHECK(num_pages > 0, "num_pages ", num_pages);
  free_.reserve(num_pages);
  for (std::int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

bool PagePool::Allocate(std::int32_t count, std::vector<std::int32_t>* out) {
  FISSION_CHECK(count >= 0);
  if (count > num_free()) return false;
  for (std::int32_t i = 0; i < count; ++i) {
    const std::int32_t page = free_.back();
    free_.pop_back();
    FISSION_CHECK_EQ(ref_counts_[page], 0);
    ref_counts_[page] = 1;
    out->push_back(page);
  }
  return true;
}

void PagePool::Ref(std::int32_t page) {
  FISSION_CHECK(page >= 0 && page < num_pages() && ref_counts_[page] > 0, "page ", page);
  ++ref_counts_[page];
}

void PagePool::Unref(std::int32_t page) {
  FISSION_CHECK(page >= 0 && page < num_pages() && ref_counts_[page] > 0, "page ", page);
  if (--ref_counts_[page] == 0) free_.push_back(page);
}

}  // namespace fission::engine
