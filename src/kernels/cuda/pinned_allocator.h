// Page-locked host memory for what the device copies back every step (the logits): a copy into
// pinned memory runs at the link's speed, and keeping freed blocks avoids both cudaHostAlloc and
// the page faults a fresh 30 MB malloc takes on first touch (which made a 64-row logits copy
// take 18 ms). Blocks are cached by size the way CachingAllocator does on the device.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "tensor/tensor.h"

namespace fission::kernels::cuda {

class PinnedHostAllocator final : public Allocator {
 public:
  PinnedHostAllocator() = default;
  ~PinnedHostAllocator() override;
  void* Allocate(std::size_t bytes) override;
  void Free(void* ptr, std::size_t bytes) override;
  Device device() const override { return Device::Cpu(); }

 private:
  std::mutex mu_;
  std::multimap<std::size_t, void*> free_;        // rounded size -> block
  std::unordered_map<void*, std::size_t> sizes_;  // every live or cached block
};

}  // namespace fission::kernels::cuda
