#include "kernels/cuda/pinned_allocator.h"

#include "kernels/cuda/cuda_common.cuh"

namespace fission::kernels::cuda {
namespace {

std::size_t RoundUp(std::size_t bytes) {
  constexpr std::size_t kStep = 64u << 10;
  return (bytes + kStep - 1) / kStep * kStep;
}

}  // namespace

PinnedHostAllocator::~PinnedHostAllocator() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, p] : free_) (void)cudaFreeHost(p);
}

void* PinnedHostAllocator::Allocate(std::size_t bytes) {
  const std::size_t size = RoundUp(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = free_.find(size); it != free_.end()) {
    void* p = it->second;
    free_.erase(it);
    return p;
  }
  void* p = nullptr;
  FISSION_CUDA(cudaHostAlloc(&p, size, cudaHostAllocPortable));
  sizes_[p] = size;
  return p;
}

void PinnedHostAllocator::Free(void* ptr, std::size_t /*bytes*/) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(ptr);
  FISSION_CHECK(it != sizes_.end(), "freeing a pointer the pinned allocator did not hand out");
  free_.emplace(it->second, ptr);
}

}  // namespace fission::kernels::cuda
