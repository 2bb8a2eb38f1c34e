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
#include <utility>

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

// Host metadata on the device: an uploaded copy (owned), or a view of a graph input block's device
// copy (not owned). Read it through ptr<T>() or tensor().data.
class DeviceMeta {
 public:
  DeviceMeta() = default;
  explicit DeviceMeta(Buffer owned) : view_(owned.tensor()), owned_(std::move(owned)) {}
  explicit DeviceMeta(const Tensor& view) : view_(view) {}
  template <typename T>
  T* ptr() const { return view_.ptr<T>(); }
  const Tensor& tensor() const { return view_; }

 private:
  Tensor view_;
  Buffer owned_;
};

// Host memory whose device copy the operations read while it is active (cuda_graph.cu): a span of
// host metadata inside [host, host + bytes) resolves to the same offset of `device`.
struct InputMirror {
  const char* host = nullptr;
  char* device = nullptr;
  std::size_t bytes = 0;
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

  // Host metadata on the device (raw bytes; read it through ptr<T>()): the device copy of an
  // active input mirror when the values lie in it, else a scratch buffer they are copied into.
  // While a graph is captured a copy would replay the values of the capture, so an upload from
  // outside the mirror is an Error there; UploadConstant is for values that never change
  // (the replay copies them again from pinned memory the graph keeps).
  template <typename T>
  DeviceMeta Upload(std::span<const T> values) {
    return UploadRaw(values.data(), values.size_bytes(), /*constant=*/false);
  }
  template <typename T>
  DeviceMeta UploadConstant(std::span<const T> values) {
    return UploadRaw(values.data(), values.size_bytes(), /*constant=*/true);
  }
  DeviceMeta UploadRaw(const void* src, std::size_t bytes, bool constant);
  // Small copies go through a pinned staging ring and return at once: a copy from pageable memory
  // would wait for all queued work first.
  void UploadBytes(void* dst, const void* src, std::size_t bytes);
  void DownloadBytes(void* dst, const void* src, std::size_t bytes);  // waits for the stream
  void Synchronize();

  // Graph capture (cuda_graph.cu). While an input mirror is set, uploads inside it resolve to its
  // device copy. Between BeginCapture and EndCapture the stream records instead of running, scratch
  // comes from the allocator's graph pool, and anything that would wait for the device fails,
  // naming `what`. EndCapture returns the captured graph and the pinned memory its constant
  // uploads copy from (the caller keeps it for the graph's life).
  void SetInputMirror(const InputMirror& mirror) { mirror_ = mirror; }
  bool capturing() const { return capturing_; }
  void FailIfCapturing(const char* what) const;
  void BeginCapture();
  cudaGraph_t EndCapture(std::vector<void*>* pinned_constants);
  void AbortCapture();

  // A device copy of `pointers` (a per-layer table of expert weight pointers), made by the first
  // call with this list and kept for the context's life, since captured graphs read it at every
  // replay. Found again by its first pointer and length, then compared whole. A list first met
  // while capturing is an Error naming `what`: the eager run before a capture builds every table
  // the step uses.
  const void* const* PointerTable(std::span<const void* const> pointers, const char* what);

  // Which scale layouts cuBLASLt's block-scaled FP8 GEMM reads, found once by comparing it with
  // the own kernel on a small problem (fp8.cu); -1 until then, kFp8OwnKernel if none matched.
  int fp8_layout = -1;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  InputMirror mirror_;
  bool capturing_ = false;
  std::vector<void*> capture_pinned_;  // pinned copies of this capture's constant uploads
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
  // After allocator_: the tables go back to it before it is destroyed.
  struct CachedPointers {
    std::vector<const void*> host;
    DeviceMeta device;
  };
  std::map<std::pair<const void*, std::size_t>, std::vector<CachedPointers>> pointer_tables_;
};

}  // namespace fission::kernels::cuda
