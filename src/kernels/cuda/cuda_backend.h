// The CUDA backend: every Backend operation on one device's memory, on one stream, with a caching
// allocator and cuBLASLt. Activations may be fp32 or bf16 tensors (arithmetic in fp32, products on
// tensor cores in bf16 where the weights are bf16); see docs/cuda.md for the dtype policy.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace fission::kernels::cuda {

class CudaContext;
class CudaMlaOps;
class CudaDsaOps;
class CudaV4Ops;

// The largest index_topk the CUDA indexer selects (one block per row keeps its candidates in
// shared memory); the loader refuses larger configs before loading.
inline constexpr int kCudaMaxIndexTopk = 4096;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  Device device() const override;
  Allocator* allocator() override;
  std::optional<DeviceMemory> Memory() override;
  // Plain fp32/bf16 weights and FP8 128×128 blocks (docs/cuda.md says which kernel runs when).
  void Linear(const Tensor& x, const WeightView& w, const Tensor& out) override;
  void Embedding(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
                 const Tensor& out) override;
  void Zero(const Tensor& x) override;
  void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) override;
  void AddRmsNorm(const Tensor& h, const Tensor& y, const Tensor& weight, float eps, const Tensor& out) override;
  void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) override;
  void Add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void SiluMul(const Tensor& gate_up, const Tensor& out) override;
  void Rope(const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim, std::span<const std::int32_t> positions,
            const Tensor& inv_freq, float scaling, bool interleaved) override;
  void WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) override;
  void MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing, const Tensor& topk_ids,
                const Tensor& topk_weights) override;
  void MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                  std::span<const WeightView> gate_up, std::span<const WeightView> down, const Tensor& out) override;
  MlaOps& mla() override;
  // dsa_indexer.cu, dsa_topk.cu, dsa_sparse_mla.cu (docs/cuda_dsa.md).
  DsaOps& dsa() override;
  // v4_streams.cu, v4_attention.cu, v4_storage.cu (docs/cuda.md, "DeepSeek-V4"): fp32 activations.
  V4Ops& v4() override;
  void GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) override;
  // fp32 or bf16 tensors to host fp32 (waits for the device).
  void CopyToHost(const Tensor& src, float* dst) override;
  // Host fp32 into an fp32, bf16, e4m3 or int32 tensor (narrow types converted on the host).
  void CopyFromHost(const float* src, const Tensor& dst) override;
  // sampling.cu: one block per row; waits for the device and copies only the results back.
  void Sample(const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out) override;
  // cuda_graph.cu: pinned input blocks mirrored to the device, and steps captured on the
  // backend's stream.
  std::unique_ptr<InputBlock> MakeInputBlock(std::size_t bytes) override;
  bool CapturesGraphs() const override { return true; }
  std::unique_ptr<StepGraph> CaptureGraph(InputBlock& inputs, const std::function<void()>& step) override;

  // Raw byte copies (integer tensors, FP8 codes) and a wait for all queued work.
  void CopyBytesToHost(const Tensor& src, void* dst) override;
  void CopyBytesFromHost(const void* src, const Tensor& dst) override;
  void Synchronize();
  // x = independent uniform values in [-bound, bound) from `seed` (random_fill.cu); fp32 or bf16,
  // or e4m3 (bound at most 448: codes of the rounded values, for FP8 dummy weights).
  void FillUniform(const Tensor& x, float bound, std::uint64_t seed);
  CudaContext& context() { return *ctx_; }
  // MoeExperts for every expert format, the activation clamped at `limit` when it is > 0
  // (DeepSeek-V4's SwiGLU; ClampedSwiGlu).
  void RoutedExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                     std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit,
                     const Tensor& out);

 private:
  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<CudaMlaOps> mla_;
  std::unique_ptr<CudaDsaOps> dsa_;
  std::unique_ptr<CudaV4Ops> v4_;
};

}  // namespace fission::kernels::cuda

namespace fission::kernels {
// The backend of CUDA device `device`; fission::Error if there is no such device.
std::unique_ptr<Backend> MakeCudaBackend(int device);
}  // namespace fission::kernels
