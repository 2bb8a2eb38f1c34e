#include "kernels/cuda/cuda_allocator.h"

#include "kernels/cuda/cuda_common.cuh"

namespace fission::kernels::cuda {

CachingAllocator::~CachingAllocator() {
  // At process exit the runtime may already be gone: release without failing.
  std::lock_guard<std::mutex> lock(mu_);
  if (cudaSetDevice(device_) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess)
    for (auto& [p, block] : blocks_) (void)cudaFree(p);
  free_.clear();
  graph_free_.clear();
}

std::size_t CachingAllocator::RoundUp(std::size_t bytes) {
  // Small blocks in 512-byte steps, large ones in 2 MiB steps: few distinct sizes, little waste.
  constexpr std::size_t kSmall = 512, kLarge = 2u << 20;
  if (bytes < (1u << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

void* CachingAllocator::Allocate(std::size_t bytes) {
  const std::size_t size = RoundUp(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mu_);
  std::multimap<std::size_t, void*>& cache = graph_pool_ ? graph_free_ : free_;
  auto it = cache.find(size);
  if (it != cache.end()) {
    void* p = it->second;
    cache.erase(it);
    if (!graph_pool_) cached_ -= size;
    in_use_ += size;
    return p;
  }
  FISSION_CUDA(cudaSetDevice(device_));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  if (err == cudaErrorMemoryAllocation && !graph_pool_) {  // returning blocks waits for the device
    (void)cudaGetLastError();  // clear it, give the cache back, try once more
    ReleaseCachedLocked();
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess)
    Fail("CUDA device ", device_, ": cannot allocate ", size, " bytes (", in_use_, " in use): ",
         cudaGetErrorString(err));
  blocks_[p] = Block{size, graph_pool_};
  in_use_ += size;
  return p;
}

void CachingAllocator::Free(void* ptr, std::size_t /*bytes*/) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(ptr);
  FISSION_CHECK(it != blocks_.end(), "freeing a pointer this allocator did not hand out");
  (it->second.graph ? graph_free_ : free_).emplace(it->second.size, ptr);
  in_use_ -= it->second.size;
  if (!it->second.graph) cached_ += it->second.size;
}

void CachingAllocator::UseGraphPool(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  graph_pool_ = on;
}

void CachingAllocator::ReleaseCached() {
  std::lock_guard<std::mutex> lock(mu_);
  ReleaseCachedLocked();
}

void CachingAllocator::ReleaseCachedLocked() {
  if (free_.empty()) return;
  // Blocks may still be read by queued work: wait for the device before returning them.
  FISSION_CUDA(cudaSetDevice(device_));
  FISSION_CUDA(cudaDeviceSynchronize());
  for (auto& [size, p] : free_) {
    FISSION_CUDA(cudaFree(p));
    blocks_.erase(p);
    cached_ -= size;
  }
  free_.clear();
}

}  // namespace fission::kernels::cuda
