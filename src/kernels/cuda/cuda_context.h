// What every CUDA operation needs: the device, its stream, the cuBLASLt handle and workspace, the
// allocator for scratch buffers, and small helpers to move host metadata to the device.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <map>
#include <vector>
#include <span>
#include <tuple>

#include "kernels/cuda/cuda_allocator.h"
#include "tensor/tensor.h"

namespace fission::kernels::cuda {

// One GEMM as cuBLASLt sees it (column-major): D[m, n] = op(A)[m, k] · op(B)[k, n], batched with
// strides. Types are cudaDataType values; the compute type follows from them.
struct GemmDesc {
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int a_type = 0;
  std::int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int b_type = 0;
  std::int64_t ldb = 0, stride_b = 0;
  void* d = nullptr;
  int d_type = 0;
  std::int64_t ldd = 0, stride_d = 0;
  int batch = 1;
  // FP8 block scaling: A (the weight) 128×128 blocks, B (the activations) 1×128 groups.
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
};

class CudaContext {
 public:
  explicit CudaContext(int device);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  CachingAllocator* allocator() { return &allocator_; }
  int sm_count() const { return sm_count_; }

  // Runs one GEMM; returns false (and launches nothing) when cuBLASLt has no algorithm for it.
  bool Gemm(const GemmDesc& g);

  // Copies host metadata into a scratch device buffer (raw bytes; read it through ptr<T>()).
  template <typename T>
  Buffer Upload(std::span<const T> values) {
    const std::int64_t bytes = static_cast<std::int64_t>(values.size_bytes());
    Buffer buf(DType::kU8, Shape{bytes == 0 ? 1 : bytes}, &allocator_);
    if (bytes > 0) UploadBytes(buf.tensor().data, values.data(), values.size_bytes());
    return buf;
  }
  // Small copies go through a pinned staging ring and return at once: a copy from pageable memory
  // would wait for all queued work first.
  void UploadBytes(void* dst, const void* src, std::size_t bytes);
  void DownloadBytes(void* dst, const void* src, std::size_t bytes);  // waits for the stream
  void Synchronize();

  // Which scale layouts cuBLASLt's block-scaled FP8 GEMM reads, found once by comparing it with
  // the own kernel on a small problem (fp8.cu); -1 until then, kFp8OwnKernel if none matched.
  int fp8_layout = -1;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  int sm_count_ = 0;
  CachingAllocator allocator_;
  // The pinned staging ring: [begin, end) regions still read by queued copies, oldest first.
  struct Staged {
    std::size_t begin, end;
    cudaEvent_t done;
  };
  char* staging_ = nullptr;
  std::size_t staging_head_ = 0;
  std::deque<Staged> staged_;
  std::vector<cudaEvent_t> spare_events_;
  // Heuristic results per problem, since the query costs more than a small GEMM.
  using GemmKey = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, int, int, int, std::int64_t,
                             std::int64_t, std::int64_t, int, bool>;
  struct CachedAlgo {
    bool ok = false;
    cublasLtMatmulAlgo_t algo{};
  };
  std::map<GemmKey, CachedAlgo> algos_;
};

}  // namespace fission::kernels::cuda
