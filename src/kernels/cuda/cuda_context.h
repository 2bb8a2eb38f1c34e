// What every CUDA operation needs: the device, its stream, the cuBLASLt handle and workspace, the
// allocator for scratch buffers, and small helpers to move host metadata to the device.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
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

// An input block's host memory and its device copy (cuda_graph.cu): a span of host metadata inside
// [host, host + bytes) resolves to the same offset of `device`.
struct InputMirror {
  const char* host = nullptr;
  char* device = nullptr;
  std::size_t bytes = 0;
  bool Holds(const void* p, std::size_t n) const {
    const char* c = static_cast<const char*>(p);
    return host != nullptr && c >= host && c + n <= host + bytes;
  }
};

// What identifies metadata an operation derives from the step's inputs (StepMemo): the operation,
// the host array it derives from, and the parameters that shape the result.
struct StepMemoKey {
  const char* op = nullptr;
  const void* source = nullptr;
  std::size_t count = 0;
  std::int64_t a = 0, b = 0, c = 0;
  auto operator<=>(const StepMemoKey&) const = default;
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
  // input block when the values lie in one, else a scratch buffer they are copied into.
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

  // Input blocks (cuda_graph.cu registers each for its life): uploads of values inside one resolve
  // to its device copy. A block's new upload or replay starts a new step (StepMemo).
  void AddInputMirror(const InputMirror& mirror);
  void RemoveInputMirror(const char* host);
  bool InInputBlock(const void* p, std::size_t bytes) const;
  void NewStep() { step_memo_.clear(); }
  // Metadata an operation derives from the step's inputs, built once per step and kept until the
  // next: every layer of a step asks with the same host arrays, so the first builds and the others
  // reuse it. `build()` returns a T. Kept only when `step_input` (the metadata it is derived from)
  // lies in an input block, whose values cannot change within a step; otherwise built every time.
  template <typename T, typename Build>
  const T& StepMemo(const StepMemoKey& key, const void* step_input, Build build) {
    if (!InInputBlock(step_input, 1)) {
      scratch_memo_ = std::make_shared<T>(build());
      return *static_cast<const T*>(scratch_memo_.get());
    }
    auto it = step_memo_.find(key);
    if (it == step_memo_.end()) it = step_memo_.emplace(key, std::make_shared<T>(build())).first;
    return *static_cast<const T*>(it->second.get());
  }
  // Host-to-device copies queued on this context so far (tests count those of one step).
  std::int64_t host_to_device_copies() const { return host_to_device_copies_; }
  void CountHostToDeviceCopy() { ++host_to_device_copies_; }

  // Graph capture (cuda_graph.cu). Between BeginCapture and EndCapture the stream records instead
  // of running, only the captured block's mirror resolves spans, scratch comes from the
  // allocator's graph pool, and anything that would wait for the device fails, naming `what`.
  // EndCapture returns the captured graph and the pinned memory its constant uploads copy from (the
  // caller keeps it for the graph's life).
  bool capturing() const { return capturing_; }
  void FailIfCapturing(const char* what) const;
  void BeginCapture(const InputMirror& block);
  cudaGraph_t EndCapture(std::vector<void*>* pinned_constants);
  // What the last capture holds: its kernel launches and its other operations (memsets, copies,
  // events). A replay runs them one after another; their count is what fusing kernels lowers.
  struct CaptureCount {
    int kernels = 0, others = 0;
  };
  CaptureCount last_capture() const { return last_capture_; }
  void AbortCapture();

  // A device copy of `pointers` (a per-layer table of expert weight pointers), made by the first
  // call with this list and kept for the context's life, since captured graphs read it at every
  // replay. Found again by its first pointer and length, then compared whole. A list first met
  // while capturing is an Error naming `what`: the eager run before a capture builds every table
  // the step uses.
  const void* const* PointerTable(std::span<const void* const> pointers, const char* what);
  // The same for a weight set: the data pointers of `first`, then those of `second` (their scales,
  // or nothing), in one table.
  const void* const* PointerTable(std::span<const Tensor> first, std::span<const Tensor> second, const char* what);

  // Which scale layouts cuBLASLt's block-scaled FP8 GEMM reads, found once by comparing it with
  // the own kernel on a small problem (fp8.cu); -1 until then, kFp8OwnKernel if none matched.
  int fp8_layout = -1;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  std::vector<InputMirror> mirrors_;
  InputMirror capture_mirror_;
  std::map<StepMemoKey, std::shared_ptr<void>> step_memo_;
  std::shared_ptr<void> scratch_memo_;  // the last unkept StepMemo result
  std::int64_t host_to_device_copies_ = 0;
  bool capturing_ = false;
  CaptureCount last_capture_;
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
