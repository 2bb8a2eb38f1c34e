// Input blocks and CUDA graphs for CudaBackend (kernels/input_block.h): a block in pinned host
// memory with a device copy, registered with the context for its life so that operations resolve
// spans inside it to the copy, and a step captured on the context's stream with its scratch in the
// graph pool.
#include <cstring>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda {
namespace {

class CudaInputBlock final : public InputBlock {
 public:
  CudaInputBlock(CudaContext& ctx, std::size_t bytes) : ctx_(ctx), bytes_(bytes) {
    FISSION_CUDA(cudaSetDevice(ctx.device()));
    FISSION_CUDA(cudaMallocHost(reinterpret_cast<void**>(&host_), bytes));
    std::memset(host_, 0, bytes);
    FISSION_CUDA(cudaMalloc(reinterpret_cast<void**>(&device_), bytes));
    FISSION_CUDA(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming));
    ctx_.AddInputMirror(mirror());
  }
  ~CudaInputBlock() override {
    ctx_.RemoveInputMirror(host_);
    if (cudaSetDevice(ctx_.device()) != cudaSuccess) return;
    (void)cudaStreamSynchronize(ctx_.stream());
    (void)cudaEventDestroy(copied_);
    (void)cudaFree(device_);
    (void)cudaFreeHost(host_);
  }

  std::span<std::byte> host() override {
    FISSION_CUDA(cudaEventSynchronize(copied_));  // the last upload or replay has read the block
    return {reinterpret_cast<std::byte*>(host_), bytes_};
  }
  InputMirror mirror() const { return {host_, device_, bytes_}; }

  // A new step's inputs: what operations derived from the last ones is stale.
  void Upload(std::span<const InputCopy> copies) override {
    FISSION_CUDA(cudaSetDevice(ctx_.device()));
    ctx_.FailIfCapturing("an input block upload");
    ctx_.NewStep();
    Copy(copies);
  }

  // Queues the copies on the stream; the host may rewrite the block once `copied_` has passed.
  void Copy(std::span<const InputCopy> copies) {
    for (const InputCopy& c : copies) {
      const std::size_t pitch = c.pitch == 0 ? c.bytes : c.pitch;
      FISSION_CHECK(c.bytes <= pitch && c.offset + (c.rows - 1) * pitch + c.bytes <= bytes_,
                    "graph input copy outside the block: offset ", c.offset, ", ", c.rows, " rows of ", c.bytes,
                    " bytes, pitch ", pitch, ", block of ", bytes_);
      if (c.bytes == 0 || c.rows == 0) continue;
      FISSION_CUDA(cudaMemcpy2DAsync(device_ + c.offset, pitch, host_ + c.offset, pitch, c.bytes, c.rows,
                                     cudaMemcpyHostToDevice, ctx_.stream()));
      ctx_.CountHostToDeviceCopy();
    }
    FISSION_CUDA(cudaEventRecord(copied_, ctx_.stream()));
  }
  void CopyAll() { Copy(std::vector<InputCopy>{{0, bytes_, 1, 0}}); }

 private:
  CudaContext& ctx_;
  std::size_t bytes_;
  char* host_ = nullptr;
  char* device_ = nullptr;
  cudaEvent_t copied_ = nullptr;
};

class CudaStepGraph final : public StepGraph {
 public:
  CudaStepGraph(CudaContext& ctx, CudaInputBlock& inputs, cudaGraphExec_t exec, std::vector<void*> pinned)
      : ctx_(ctx), inputs_(inputs), exec_(exec), pinned_(std::move(pinned)) {}
  ~CudaStepGraph() override {
    if (cudaSetDevice(ctx_.device()) != cudaSuccess) return;
    (void)cudaStreamSynchronize(ctx_.stream());
    (void)cudaGraphExecDestroy(exec_);
    for (void* p : pinned_) (void)cudaFreeHost(p);
  }

  void Replay(std::span<const InputCopy> copies) override {
    FISSION_CUDA(cudaSetDevice(ctx_.device()));
    ctx_.NewStep();
    inputs_.Copy(copies);
    FISSION_CUDA(cudaGraphLaunch(exec_, ctx_.stream()));
  }

 private:
  CudaContext& ctx_;
  CudaInputBlock& inputs_;
  cudaGraphExec_t exec_;
  std::vector<void*> pinned_;  // the constant uploads the graph copies from
};

}  // namespace

std::unique_ptr<InputBlock> CudaBackend::MakeInputBlock(std::size_t bytes) {
  return std::make_unique<CudaInputBlock>(*ctx_, bytes);
}

std::unique_ptr<StepGraph> CudaBackend::CaptureGraph(InputBlock& inputs, const std::function<void()>& step) {
  auto& block = dynamic_cast<CudaInputBlock&>(inputs);
  FISSION_CUDA(cudaSetDevice(ctx_->device()));
  ctx_->NewStep();
  block.CopyAll();
  step();  // eagerly first: cuBLASLt's choices, FP8 layout probe, tables, function attributes
  ctx_->BeginCapture(block.mirror());
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
