// The per-device caching allocator: freed blocks are kept in size buckets and handed out again, so
// the many short-lived scratch buffers of a step cost no cudaMalloc/cudaFree. All work of a backend
// runs on one stream, so a block freed by the host and reused by a later launch is ordered after
// every earlier use of it.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "tensor/tensor.h"

namespace fission::kernels::cuda {

class CachingAllocator final : public Allocator {
 public:
  explicit CachingAllocator(int device) : device_(device) {}
  ~CachingAllocator() override;
  void* Allocate(std::size_t bytes) override;
  void Free(void* ptr, std::size_t bytes) override;
  Device device() const override { return Device::Cuda(device_); }

  // Returns every cached block of the general pool to the driver.
  void ReleaseCached();

  // While the graph pool is active (CUDA graph capture) new blocks come from it. A block stays in
  // the pool it was made for: freed, it is cached for that pool alone, and the graph pool's blocks
  // go back to the driver only with the allocator, since captured graphs keep using their
  // addresses. The graphs of one device share the pool; their replays are ordered on its stream.
  void UseGraphPool(bool on);
  std::size_t bytes_in_use() const { return in_use_; }
  // Cached blocks of the general pool: what ReleaseCached returns (the graph pool's stay).
  std::size_t bytes_cached() const { return cached_; }

 private:
  static std::size_t RoundUp(std::size_t bytes);
  void ReleaseCachedLocked();

  struct Block {
    std::size_t size;
    bool graph;  // belongs to the graph pool
  };
  int device_;
  std::mutex mu_;
  bool graph_pool_ = false;
  std::multimap<std::size_t, void*> free_, graph_free_;  // rounded size -> cached block, per pool
  std::unordered_map<void*, Block> blocks_;                // every live or cached block
  std::size_t in_use_ = 0, cached_ = 0;  // cached_: the general pool's
};

}  // namespace fission::kernels::cuda
