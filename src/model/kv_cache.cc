#include "model/kv_cache.h"

#include <cstring>

namespace fission::model {

KvCache::KvCache(std::vector<KvLayerLayout> layers, std::int64_t num_pages, std::int64_t page_size,
                 Allocator* allocator)
    : layers_(std::move(layers)), num_pages_(num_pages), page_size_(page_size) {
  FISSION_CHECK(num_pages > 0 && page_size > 0, "num_pages ", num_pages, " page_size ", page_size);
  storage_.reserve(layers_.size());
  for (const KvLayerLayout& l : layers_) {
    storage_.emplace_back(l.dtype, Shape{num_pages * page_size, l.width}, allocator);
    if (allocator->device().type == DeviceType::kCpu)
      std::memset(storage_.back().tensor().data, 0, storage_.back().tensor().bytes());
  }
}

std::int64_t KvCache::bytes_per_token() const { return KvBytesPerToken(layers_); }

std::int64_t KvBytesPerToken(const std::vector<KvLayerLayout>& layers) {
  std::int64_t bytes = 0;
  for (const KvLayerLayout& l : layers) bytes += static_cast<std::int64_t>(DTypeBytes(l.dtype, l.width));
  return bytes;
}

}  // namespace fission::model
