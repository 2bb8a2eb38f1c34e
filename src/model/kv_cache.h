// Paged KV cache storage. The model declares the per-token row layout of every layer; the cache
// holds, per layer, `num_pages * page_size` rows of that width. Which pages belong to which
// sequence is the engine's business (page pool, prefix cache); the model only reads and writes rows
// at the slots and block tables a ForwardBatch names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fission::model {

// One layer's per-token row: `width` values of `dtype`. MLA keeps one latent row per token
// (kv_lora_rank + qk_rope_head_dim values); other attention kinds declare their own widths.
struct KvLayerLayout {
  std::int64_t width = 0;
  DType dtype = DType::kF32;
};

class KvCache {
 public:
  KvCache(std::vector<KvLayerLayout> layers, std::int64_t num_pages, std::int64_t page_size,
          Allocator* allocator = CpuAllocator());

  std::int64_t num_pages() const { return num_pages_; }
  std::int64_t page_size() const { return page_size_; }
  std::int64_t num_slots() const { return num_pages_ * page_size_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const KvLayerLayout& layout(int layer) const { return layers_[layer]; }
  // [num_slots, width] rows of one layer.
  const Tensor& layer(int layer) const { return storage_[layer].tensor(); }
  // Bytes one token takes over all layers.
  std::int64_t bytes_per_token() const;

 private:
  std::vector<KvLayerLayout> layers_;
  std::int64_t num_pages_;
  std::int64_t page_size_;
  std::vector<Buffer> storage_;
};

// Bytes per token of a layout (used to size the pool from a memory budget).
std::int64_t KvBytesPerToken(const std::vector<KvLayerLayout>& layers);

}  // namespace fission::model
