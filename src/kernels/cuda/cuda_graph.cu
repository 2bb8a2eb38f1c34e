// CUDA graphs for CudaBackend (kernels/step_graph.h): an input block in pinned host memory with a
// device copy, and a step captured on the context's stream with its scratch in the graph pool.
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda {
namespace {

class CudaGraphInputs final : public GraphInputs {
 public:
  CudaGraphInputs(CudaContext& ctx, std::size_t bytes) : ctx_(ctx), bytes_(bytes) {
    FISSION_CUDA(cudaSetDevice(ctx.device()));
    FISSION_CUDA(cudaMallocHost(reinterpret_cast<void**>(&host_), bytes));
    std::memset(host_, 0, bytes);
    FISSION_CUDA(cudaMalloc(reinterpret_cast<void**>(&device_), bytes));
    FISSION_CUDA(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
  }
  ~CudaGraphInputs() override {
    if (cudaSetDevice(ctx_.device()) != cudaSuccess) return;
    (void)cudaStreamSynchronize(ctx_.stream());
    (void)cudaEventDestroy(copied_);
    (void)cudaFree(device_);
    (void)cudaFreeHost(host_);
  }

  std::span<std::byte> host() override {
    FISSION_CUDA(cudaEventSynchronize(copied_));  // the last replay's copy has read the block
    return {reinterpret_cast<std::byte*>(host_), bytes_};
  }
  InputMirror mirror() const { return {host_, device_, bytes_}; }

  // Queues the copies on the stream; the host may rewrite the block once `copied_` has passed.
  void Copy(std::span<const GraphInputCopy> copies) {
    for (const GraphInputCopy& c : copies) {
      const std::size_t pitch = c.pitch == 0 ? c.bytes : c.pitch;
      FISSION_CHECK(c.bytes <= pitch && c.offset + (c.rows - 1) * pitch + c.bytes <= bytes_,
                    "graph input copy outside the block: offset ", c.offset, ", ", c.rows, " rows of ", c.bytes,
                    " bytes, pitch ", pitch, ", block of ", bytes_);
      if (c.bytes == 0 || c.rows == 0) continue;
      FISSION_CUDA(cudaMemcpy2DAsync(device_ + c.offset, pitch, host_ + c.offset, pitch, c.bytes, c.rows,
                                     cudaMemcpyHostToDevice, ctx_.stream()));
    }
    FISSION_CUDA(cudaEventRecord(copied_, ctx_.stream()));
  }
  void CopyAll() { Copy(std::vector<GraphInputCopy>{{0, bytes_, 1, 0}}); }

 private:
  CudaContext& ctx_;
  std::size_t bytes_;
  char* host_ = nullptr;
  char* device_ = nullptr;
  cudaEvent_t copied_ = nullptr;
};

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(CudaContext& ctx, CudaGraphInputs& inputs, cudaGraphExec_t exec, std::vector<void*> pinned)
      : ctx_(ctx), inputs_(inputs), exec_(exec), pinned_(std::move(pinned)) {}
  ~CudaStepGraph() override {
    if (cudaSetDevice(ctx_.device()) != cudaSuccess) return;
    (void)cudaStreamSynchronize(ctx_.stream());
    (void)cudaGraphExecDestroy(exec_);
    for (void* p : pinned_) (void)cudaFreeHost(p);
  }

  void Replay(std::span<const GraphInputCopy> copies) override {
    FISSION_CUDA(cudaSetDevice(ctx_.device()));
    inputs_.Copy(copies);
    FISSION_CUDA(cudaGraphLaunch(exec_, ctx_.stream()));
  }

 private:
  CudaContext& ctx_;
  CudaGraphInputs& inputs_;
  cudaGraphExec_t exec_;
  std::vector<void*> pinned_;  // the constant uploads the graph copies from
};

// Sets the input mirror for a scope.
class MirrorScope {
 public:
  MirrorScope(CudaContext& ctx, const InputMirror& mirror) : ctx_(ctx) { ctx.SetInputMirror(mirror); }
  ~MirrorScope() { ctx_.SetInputMirror({}); }

 private:
  CudaContext& ctx_;
};

}  // namespace

std::unique_ptr<GraphInputs> CudaBackend::MakeGraphInputs(std::size_t bytes) {
  return std::make_unique<CudaGraphInputs>(*ctx_, bytes);
}

std::unique_ptr<StepGraph> CudaBackend::CaptureGraph(GraphInputs& inputs, const std::function<void()>& step) {
  auto& block = dynamic_cast<CudaGraphInputs&>(inputs);
  FISSION_CUDA(cudaSetDevice(ctx_->device()));
  block.CopyAll();
  MirrorScope scope(*ctx_, block.mirror());
  step();  // eagerly first: cuBLASLt's choices, FP8 layout probe, tables, function attributes
  ctx_->BeginCapture();
  try {
    step();
  } catch (...) {
    ctx_->AbortCapture();
    throw;
  }
  std::vector<void*> pinned;
  cudaGraph_t graph = ctx_->EndCapture(&pinned);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    for (void* p : pinned) (void)cudaFreeHost(p);
    FISSION_CUDA(err);
  }
  return std::make_unique<CudaStepGraph>(*ctx_, block, exec, std::move(pinned));
}

}  // namespace fission::kernels::cuda
