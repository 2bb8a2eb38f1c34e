// The operation interface. Model code calls only these operations and never touches device memory
// directly; each backend (kernels/cpu, kernels/cuda) implements all of them. Tensors are views in
// the backend's device memory; host-side metadata (token positions, sequence boundaries, block
// tables) travels as plain spans, which a backend with its own memory reads from the step's input
// block (kernels/input_block.h) without copying them again.
//
// The operations are generic: a weight carries its format (tensor/weight.h) and each backend
// dispatches on it inside Linear and MoeExperts. Operations that belong to one attention family
// are grouped behind an accessor (mla(): kernels/mla_ops.h; dsa(): kernels/dsa_ops.h), so the
// interface does not grow one virtual per fused operation.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kernels/dsa_ops.h"
#include "kernels/input_block.h"
#include "kernels/mla_ops.h"
#include "kernels/sampling.h"
#include "kernels/v4_ops.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace fission::kernels {

struct MoeRouting {
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  // Experts every token takes, appended after the routed choices: columns top_k + s hold expert
  // num_experts + s with weight 1 (DeepSeekMoE's shared experts run with the routed ones).
  std::int64_t shared_experts = 0;
};

// A device's memory as the driver reports it (the KV pool is sized from it).
struct DeviceMemory {
  std::int64_t free_bytes = 0;
  std::int64_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual Allocator* allocator() = 0;
  // Free and total memory of a device with its own memory, after returning cached blocks to the
  // driver; nullopt for host memory (the CPU backend).
  virtual std::optional<DeviceMemory> Memory() { return std::nullopt; }

  // out[n, m] = x[n, k] · w[m, k]ᵀ (a Linear layer without bias), for a weight of any format the
  // backend supports (an Error names the format otherwise). Plain weights multiply as they are.
  // FP8 block weights (e4m3, fp32 scales per 128×128): x is first quantized per token and
  // 128-wide group of k: scale = max(amax, 1e-4) / 448, code = e4m3(x / scale), rounded to nearest
  // even and saturated; then out[n, m] = Σ_groups scale_x · scale_w · Σ code_x · code_w.
  virtual void Linear(const Tensor& x, const WeightView& w, const Tensor& out) = 0;
  // out[i] = table[ids[i] - vocab_start], or zeros when ids[i] falls outside the table's rows
  // (a vocab-parallel rank holds rows [vocab_start, vocab_start + rows)).
  virtual void Embedding(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
                         const Tensor& out) = 0;
  // Sets every element to zero.
  virtual void Zero(const Tensor& x) = 0;
  // Row-wise RMSNorm of the first weight.numel() values of each row of x [..., width]; the rest of
  // each row is copied unchanged (MLA normalises the latent part of a [latent | rope] row this way).
  // `x` and `out` may be the same tensor.
  virtual void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out) = 0;
  // Row-wise LayerNorm over the whole last dimension (mean and biased variance, then
  // weight · x̂ + bias); `x` and `out` may be the same tensor.
  virtual void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out) = 0;
  // out = a + b (same shapes; may alias).
  virtual void Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
  // The residual step of a pre-norm layer: h += y, then out = RmsNorm(h) as RmsNorm defines it
  // (y distinct from h; out may be y). A backend may fuse the two; the result is the same bits.
  virtual void AddRmsNorm(const Tensor& h, const Tensor& y, const Tensor& weight, float eps, const Tensor& out) {
    Add(h, y, h);
    RmsNorm(h, weight, eps, out);
  }
  // gate_up [n, 2I] (gate first, then up) -> out [n, I] = silu(gate) * up.
  virtual void SiluMul(const Tensor& gate_up, const Tensor& out) = 0;
  // Rotates, in place, dims [rope_offset, rope_offset + rope_dim) of every head of x [n, heads, head_dim]
  // by angle positions[t] * inv_freq[i], cos and sin scaled by `scaling`. Interleaved input pairs are
  // (2i, 2i+1) (DeepSeek's layout), otherwise (i, i + rope_dim/2); the output is always in the
  // half-split layout, as transformers produces it.
  virtual void Rope(const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim,
                    std::span<const std::int32_t> positions, const Tensor& inv_freq, float scaling,
                    bool interleaved) = 0;
  // Copies rows [n, width] into cache rows `slots` of a [num_slots, width] cache; a slot of -1
  // skips its row (the padding rows of a captured decode step).
  virtual void WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache) = 0;
  // DeepSeekMoE routing: sigmoid scores, bias added for selection only, group-limited top-k,
  // optional renormalisation, routed scaling, then routing.shared_experts always-on columns.
  // ids: I32 [n, top_k + shared_experts], weights: F32 [n, top_k + shared_experts].
  virtual void MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing,
                        const Tensor& topk_ids, const Tensor& topk_weights) = 0;
  // Routed experts: out[t] = Σ_k weights[t,k] · down_e(silu(gate_e x) · up_e x) with e = ids[t,k];
  // gate_up[e] is [2I, H], down[e] is [H, I], all of one format (an Error otherwise). Experts with
  // no tokens are skipped. With FP8 block weights each expert's inputs (x rows, then
  // silu(gate)·up) are quantized per token and 128-group exactly as Linear does.
  virtual void MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                          std::span<const WeightView> gate_up, std::span<const WeightView> down,
                          const Tensor& out) = 0;
  // Multi-head latent attention (DeepSeek-V2/V3 and the families built on it).
  virtual MlaOps& mla() = 0;
  // DeepSeek Sparse Attention: the lightning indexer and MLA over its selection.
  virtual DsaOps& dsa() = 0;
  // DeepSeek-V4: hyper-connections, compressors, window-and-entries attention, its MoE pieces.
  // **Decision**: a backend that has not implemented them yet inherits this refusal, so a V4 model
  // on it fails at load with the backend's name instead of the interface forcing stubs.
  virtual V4Ops& v4() { Fail("DeepSeek-V4 operations are not implemented on the ", DeviceName(device()), " backend yet"); }
  // Copies rows `indices` of x [n, d] into out [len(indices), d].
  virtual void GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) = 0;
  // Copies a device tensor to host memory (fp32 in, fp32 out).
  virtual void CopyToHost(const Tensor& src, float* dst) = 0;
  // Uploads host fp32 values into a backend tensor of the same element count.
  virtual void CopyFromHost(const float* src, const Tensor& dst) = 0;
  // Uploads dst.bytes() raw bytes (FP8 codes kept as they are stored).
  virtual void CopyBytesFromHost(const void* src, const Tensor& dst) = 0;
  // Downloads src.bytes() raw bytes (integer tensors, codes), waiting for the device.
  virtual void CopyBytesToHost(const Tensor& src, void* dst) = 0;
  // Chooses a token for each of `rows` from fp32 logits [n, vocab] in this backend's memory (see
  // kernels/sampling.h; SampleOnHost is the reference). Only the results come back to the host.
  virtual void Sample(const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out) = 0;

  // The step's input block (kernels/input_block.h). By default a host-only block, which is all a
  // backend working in host memory needs.
  virtual std::unique_ptr<InputBlock> MakeInputBlock(std::size_t bytes) {
    return std::make_unique<HostInputBlock>(bytes);
  }
  // Captured steps: whether this backend records and replays them. When it does, CaptureGraph
  // runs `step` once as usual (first uses set up what capture cannot: library handles, tables,
  // function attributes), then again while capturing, and returns the captured graph. The device
  // copy of `inputs` is filled from its host memory first. An Error, with nothing captured, when
  // an operation cannot be captured.
  virtual bool CapturesGraphs() const { return false; }
  virtual std::unique_ptr<StepGraph> CaptureGraph(InputBlock& /*inputs*/, const std::function<void()>& /*step*/) {
    return nullptr;
  }
};

std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace fission::kernels
