#include "kernels/cuda/cuda_context.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/cuda_common.cuh"

namespace fission::kernels::cuda {

[[noreturn]] void CudaFailed(const char* file, int line, const char* what, const char* message) {
  CheckFailed(file, line, what, StrCat("CUDA: ", message));
}

// libcublasLt alone has no status-to-string function; the numbers are cublasStatus_t's.
[[noreturn]] void CublasFailed(const char* file, int line, const char* what, int status) {
  CheckFailed(file, line, what, StrCat("cuBLAS status ", status));
}

namespace {
constexpr std::size_t kWorkspaceBytes = 64u << 20;  // cuBLASLt's recommendation for Hopper is >= 32 MiB
constexpr std::size_t kStagingBytes = 32u << 20;     // pinned ring for host metadata
constexpr std::size_t kMaxStaged = 4u << 20;         // larger copies (weights) go direct

// RAII holders so an error thrown mid-setup leaks no descriptor.
struct LayoutHolder {
  cublasLtMatrixLayout_t l = nullptr;
  ~LayoutHolder() {
    if (l) cublasLtMatrixLayoutDestroy(l);
  }
};
struct DescHolder {
  cublasLtMatmulDesc_t d = nullptr;
  ~DescHolder() {
    if (d) cublasLtMatmulDescDestroy(d);
  }
};
struct PrefHolder {
  cublasLtMatmulPreference_t p = nullptr;
  ~PrefHolder() {
    if (p) cublasLtMatmulPreferenceDestroy(p);
  }
};

void MakeLayout(LayoutHolder& h, int type, std::int64_t rows, std::int64_t cols, std::int64_t ld, int batch,
                std::int64_t stride) {
  FISSION_CUBLAS(cublasLtMatrixLayoutCreate(&h.l, static_cast<cudaDataType_t>(type), rows, cols, ld));
  if (batch > 1) {
    std::int32_t count = batch;
    FISSION_CUBLAS(cublasLtMatrixLayoutSetAttribute(h.l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    FISSION_CUBLAS(
        cublasLtMatrixLayoutSetAttribute(h.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
}

}  // namespace

CudaContext::CudaContext(int device) : device_(device), allocator_(device) {
  int count = 0;
  FISSION_CUDA(cudaGetDeviceCount(&count));
  if (device < 0 || device >= count) Fail("CUDA device ", device, " does not exist (", count, " visible)");
  FISSION_CUDA(cudaSetDevice(device));
  FISSION_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  FISSION_CUBLAS(cublasLtCreate(&lt_));
  FISSION_CUDA(cudaMalloc(&workspace_, kWorkspaceBytes));
  workspace_bytes_ = kWorkspaceBytes;
  FISSION_CUDA(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device));
  FISSION_CUDA(cudaMallocHost(reinterpret_cast<void**>(&staging_), kStagingBytes));
}

CudaContext::~CudaContext() {
  if (cudaSetDevice(device_) != cudaSuccess) return;
  if (capturing_) AbortCapture();
  (void)cudaStreamSynchronize(stream_);
  for (const Staged& st : staged_) (void)cudaEventDestroy(st.done);
  for (cudaEvent_t e : spare_events_) (void)cudaEventDestroy(e);
  (void)cudaFreeHost(staging_);
  (void)cudaFree(workspace_);
  if (lt_) cublasLtDestroy(lt_);
  (void)cudaStreamDestroy(stream_);
}

void CudaContext::AddInputMirror(const InputMirror& mirror) { mirrors_.push_back(mirror); }

void CudaContext::RemoveInputMirror(const char* host) {
  std::erase_if(mirrors_, [&](const InputMirror& m) { return m.host == host; });
  step_memo_.clear();
}

bool CudaContext::InInputBlock(const void* p, std::size_t bytes) const {
  if (capturing_) return capture_mirror_.Holds(p, bytes);
  return std::any_of(mirrors_.begin(), mirrors_.end(), [&](const InputMirror& m) { return m.Holds(p, bytes); });
}

DeviceMeta CudaContext::UploadRaw(const void* src, std::size_t bytes, bool constant) {
  const char* p = static_cast<const char*>(src);
  auto resolve = [&](const InputMirror& m) {
    Tensor view;
    view.data = m.device + (p - m.host);
    view.dtype = DType::kU8;
    view.shape = Shape{static_cast<std::int64_t>(bytes)};
    view.device = Device::Cuda(device_);
    return DeviceMeta(view);
  };
  if (bytes > 0) {
    if (capturing_) {
      if (capture_mirror_.Holds(p, bytes)) return resolve(capture_mirror_);
    } else {
      for (const InputMirror& m : mirrors_)
        if (m.Holds(p, bytes)) return resolve(m);
    }
  }
  Buffer buf(DType::kU8, Shape{bytes == 0 ? 1 : static_cast<std::int64_t>(bytes)}, &allocator_);
  if (bytes == 0) return DeviceMeta(std::move(buf));
  if (!capturing_) {
    UploadBytes(buf.tensor().data, src, bytes);
    return DeviceMeta(std::move(buf));
  }
  if (!constant)
    Fail("CUDA graph capture: an operation uploads ", bytes, " bytes of step metadata from outside the graph's "
         "input block, so a replay would reuse this step's values");
  // The graph copies the constant again at every replay, from pinned memory it keeps.
  void* pinned = nullptr;
  FISSION_CUDA(cudaMallocHost(&pinned, bytes));
  capture_pinned_.push_back(pinned);
  std::memcpy(pinned, src, bytes);
  FISSION_CUDA(cudaMemcpyAsync(buf.tensor().data, pinned, bytes, cudaMemcpyHostToDevice, stream_));
  CountHostToDeviceCopy();
  return DeviceMeta(std::move(buf));
}

void CudaContext::FailIfCapturing(const char* what) const {
  if (capturing_) Fail("CUDA graph capture: ", what, " cannot be captured (it waits for the device or uploads step data)");
}

void CudaContext::BeginCapture(const InputMirror& block) {
  FISSION_CHECK(!capturing_, "a CUDA graph capture is already running on device ", device_);
  step_memo_.clear();  // what the eager run before the capture derived is not the graph's
  capture_mirror_ = block;
  allocator_.UseGraphPool(true);
  // Relaxed: the allocator may cudaMalloc new pool blocks while the stream records.
  FISSION_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
}

cudaGraph_t CudaContext::EndCapture(std::vector<void*>* pinned_constants) {
  FISSION_CHECK(capturing_, "no CUDA graph capture to end");
  capturing_ = false;
  capture_mirror_ = {};
  step_memo_.clear();
  allocator_.UseGraphPool(false);
  cudaGraph_t graph = nullptr;
  FISSION_CUDA(cudaStreamEndCapture(stream_, &graph));
  std::size_t count = 0;
  FISSION_CUDA(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) FISSION_CUDA(cudaGraphGetNodes(graph, nodes.data(), &count));
  last_capture_ = {};
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    FISSION_CUDA(cudaGraphNodeGetType(node, &type));
    ++(type == cudaGraphNodeTypeKernel ? last_capture_.kernels : last_capture_.others);
  }
  *pinned_constants = std::move(capture_pinned_);
  capture_pinned_.clear();
  return graph;
}

void CudaContext::AbortCapture() {
  if (!capturing_) return;
  capturing_ = false;
  capture_mirror_ = {};
  step_memo_.clear();
  allocator_.UseGraphPool(false);
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream_, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // an invalidated capture leaves its error behind
  for (void* p : capture_pinned_) (void)cudaFreeHost(p);
  capture_pinned_.clear();
}

const void* const* CudaContext::PointerTable(std::span<const Tensor> first, std::span<const Tensor> second,
                                             const char* what) {
  std::vector<const void*> pointers;
  pointers.reserve(first.size() + second.size());
  for (const Tensor& t : first) pointers.push_back(t.data);
  for (const Tensor& t : second) pointers.push_back(t.data);
  return PointerTable(pointers, what);
}

const void* const* CudaContext::PointerTable(std::span<const void* const> pointers, const char* what) {
  FISSION_CHECK(!pointers.empty(), "an empty pointer table for ", what);
  std::vector<CachedPointers>& same_key = pointer_tables_[{pointers.front(), pointers.size()}];
  for (const CachedPointers& t : same_key)
    if (std::equal(t.host.begin(), t.host.end(), pointers.begin())) return t.device.ptr<const void* const>();
  if (capturing_)
    Fail("CUDA graph capture: ", what, " meets a weight set it has no device pointer table for; run the step "
         "once without capturing first (that builds the table)");
  CachedPointers t{std::vector<const void*>(pointers.begin(), pointers.end()), Upload(pointers)};
  same_key.push_back(std::move(t));
  return same_key.back().device.ptr<const void* const>();
}

void CudaContext::UploadBytes(void* dst, const void* src, std::size_t bytes) {
  FailIfCapturing("a copy of host data");
  CountHostToDeviceCopy();
  if (bytes > kMaxStaged) {
    FISSION_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    return;
  }
  const std::size_t size = (bytes + 255) / 256 * 256;
  if (staging_head_ + size > kStagingBytes) staging_head_ = 0;
  const std::size_t begin = staging_head_, end = begin + size;
  // Regions are handed out in ring order and the stream finishes copies in order: drop what is
  // done, then wait for any older copy still reading the region.
  auto retire_front = [&] {
    spare_events_.push_back(staged_.front().done);
    staged_.pop_front();
  };
  while (!staged_.empty() && cudaEventQuery(staged_.front().done) == cudaSuccess) retire_front();
  (void)cudaGetLastError();  // cudaEventQuery's cudaErrorNotReady is not an error
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    if (staged_[i].begin < end && begin < staged_[i].end) {
      FISSION_CUDA(cudaEventSynchronize(staged_[i].done));
      for (std::size_t j = 0; j <= i; ++j) retire_front();
      i = static_cast<std::size_t>(-1);  // rescan from the new front
    }
  }
  std::memcpy(staging_ + begin, src, bytes);
  FISSION_CUDA(cudaMemcpyAsync(dst, staging_ + begin, bytes, cudaMemcpyHostToDevice, stream_));
  cudaEvent_t done;
  if (spare_events_.empty()) {
    FISSION_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  } else {
    done = spare_events_.back();
    spare_events_.pop_back();
  }
  FISSION_CUDA(cudaEventRecord(done, stream_));
  staged_.push_back({begin, end, done});
  staging_head_ = end;
}

void CudaContext::DownloadBytes(void* dst, const void* src, std::size_t bytes) {
  FailIfCapturing("a copy to the host");
  FISSION_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  FISSION_CUDA(cudaStreamSynchronize(stream_));
}

void CudaContext::Synchronize() {
  FailIfCapturing("a wait for the device");
  FISSION_CUDA(cudaStreamSynchronize(stream_));
}

bool CudaContext::Gemm(const GemmDesc& g) {
  FISSION_CHECK(g.m > 0 && g.n > 0 && g.k > 0, "empty GEMM ", g.m, "x", g.n, "x", g.k);
  const bool fp8 = g.a_type == CUDA_R_8F_E4M3;
  const bool aligned = Aligned16(g.a) && Aligned16(g.b) && Aligned16(g.d);
  const GemmKey key{g.a_type, g.d_type, g.m, g.n, g.k, g.trans_a, g.trans_b, g.batch, g.lda, g.ldb, g.ldd,
                    g.b_type, aligned};

  DescHolder desc;
  const cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  FISSION_CUBLAS(cublasLtMatmulDescCreate(&desc.d, compute, CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  FISSION_CUBLAS(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  FISSION_CUBLAS(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (fp8) {
    const std::int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const std::int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    FISSION_CUBLAS(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
    FISSION_CUBLAS(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
    FISSION_CUBLAS(
        cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.a_scale, sizeof(g.a_scale)));
    FISSION_CUBLAS(
        cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.b_scale, sizeof(g.b_scale)));
  }
  LayoutHolder la, lb, ld;
  MakeLayout(la, g.a_type, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch, g.stride_a);
  MakeLayout(lb, g.b_type, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch, g.stride_b);
  MakeLayout(ld, g.d_type, g.m, g.n, g.ldd, g.batch, g.stride_d);

  auto it = algos_.find(key);
  if (it == algos_.end()) {
    PrefHolder pref;
    FISSION_CUBLAS(cublasLtMatmulPreferenceCreate(&pref.p));
    FISSION_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes_, sizeof(workspace_bytes_)));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(lt_, desc.d, la.l, lb.l, ld.l, ld.l, pref.p, 1, &result, &found);
    CachedAlgo cached;
    cached.ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (cached.ok) cached.algo = result.algo;
    it = algos_.emplace(key, cached).first;
  }
  if (!it->second.ok) return false;
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st = cublasLtMatmul(lt_, desc.d, &alpha, g.a, la.l, g.b, lb.l, &beta, g.d, ld.l, g.d, ld.l,
                                           &it->second.algo, workspace_, workspace_bytes_, stream_);
  // A block-scaled FP8 problem the library turns down is reported, so the caller can take its own kernel.
  if (fp8 && (st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE)) {
    it->second.ok = false;
    return false;
  }
  FISSION_CUBLAS(st);
  return true;
}

}  // namespace fission::kernels::cuda
