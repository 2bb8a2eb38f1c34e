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

std::int32_t PagesForTokenBudget(std::int64_t max_total_tokens, std::int32_t page_size) {
  if (page_size < 1) Fail("--page-size must be >= 1, got ", page_size);
  if (max_total_tokens < page_size)
    Fail("--max-total-tokens must be at least one page (--page-size ", page_size, "), got ", max_total_tokens);
  const std::int64_t pages = max_total_tokens / page_size;
  if (pages > std::numeric_limits<std::int32_t>::max() / page_size)
    Fail("--max-total-tokens is too large: ", max_total_tokens);
  return static_cast<std::int32_t>(pages);
}

std::int32_t PagesForByteBudget(std::int64_t bytes, const std::vector<model::KvLayerLayout>& layout,
                                std::int32_t page_size) {
  FISSION_CHECK(page_size >= 1);
  const std::int64_t per_page = model::KvBytesPerToken(layout) * page_size;
  FISSION_CHECK(per_page > 0, "the model declares no KV rows");
  const std::int64_t pages = bytes / per_page;
  if (pages < 1) Fail("KV cache memory budget of ", bytes, " bytes is below one page (", per_page, " bytes)");
  return static_cast<std::int32_t>(std::min<std::int64_t>(pages, std::numeric_limits<std::int32_t>::max() / page_size));
}

}  // namespace fission::engine
