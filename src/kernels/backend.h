// The operation interface. Model code calls only these operations and never touches device memory
// directly; each backend (kernels/cpu, kernels/cuda) implements all of them. Tensors are views in
// the backend's device memory; host-side metadata (token positions, sequence boundaries, block
// tables) travels as plain spans.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "kernels/sampling.h"
#include "kernels/step_graph.h"
#include "tensor/tensor.h"

namespace fission::kernels {

// One sequence's queries in a step, as attention sees them. Query t sits in row query_start + t
// and attends the keys at positions [0, query_positions[t]]; all kv_len keys of the sequence are in
// the cache. The queries need not be consecutive positions: under context parallelism a rank owns
// every C-th token.
struct SeqAttention {
  std::int32_t query_start = 0;
  std::int32_t query_len = 0;
  std::int32_t kv_len = 0;                        // keys of the sequence in the cache
  std::span<const std::int32_t> query_positions;  // query_len positions
  std::span<const std::int32_t> block_table;      // pages of positions [0, kv_len)
};

struct MlaShape {
  std::int64_t num_heads = 0;  // heads computed here (the local heads under tensor parallelism)
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t kv_lora_rank = 0;
  float softmax_scale = 1.0f;
  std::int64_t page_size = 0;
};

struct MoeRouting {
  std::int64_t num_experts = 0;
  std::int64_t top_k = 0;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
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

  // out[n, m] = x[n, k] · w[m, k]ᵀ (a Linear layer without bias).
  virtual void Linear(const Tensor& x, const Tensor& w, const Tensor& out) = 0;
  // FP8 Linear (DeepSeek-V3's checkpoint format): w is e4m3 [m, k] with fp32 block scales
  // w_scale [⌈m/128⌉, ⌈k/128⌉] (dequantised w = code · scale of its 128×128 block). x is first
  // quantized per token and 128-wide group of k: scale = max(amax, 1e-4) / 448, code =
  // e4m3(x / scale), rounded to nearest even and saturated; then out[n, m] = Σ_groups
  // scale_x · scale_w · Σ code_x · code_w.
  virtual void LinearFp8(const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) = 0;
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
  // out = a + b (same shapes; may alias).
  virtual void Add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;
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
  // optional renormalisation, routed scaling. ids: I32 [n, top_k], weights: F32 [n, top_k].
  virtual void MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing,
                        const Tensor& topk_ids, const Tensor& topk_weights) = 0;
  // Routed experts: out[t] = Σ_k weights[t,k] · down_e(silu(gate_e x) · up_e x) with e = ids[t,k];
  // gate_up[e] is [2I, H], down[e] is [H, I]. Experts with no tokens are skipped.
  virtual void MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                          std::span<const Tensor> gate_up, std::span<const Tensor> down, const Tensor& out) = 0;
  // FP8 routed experts (DeepSeek-V3's checkpoint format): MoeExperts with e4m3 gate_up[e] [2I, H]
  // and down[e] [H, I] and their fp32 128×128 block scales gate_up_scale[e] [⌈2I/128⌉, ⌈H/128⌉],
  // down_scale[e] [⌈H/128⌉, ⌈I/128⌉]. Each expert's inputs (x rows, then silu(gate)·up) are
  // quantized per token and 128-group exactly as LinearFp8 does.
  virtual void MoeExpertsFp8(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                             std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                             std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out) = 0;
  // MLA attention over a latent cache of rows [kv_lora_rank | rope] per token.
  // q: [n, heads, nope + rope] with rope already applied; kv_b: [heads·(nope + v), kv_lora_rank];
  // out: [n, heads, v]. Each query attends its sequence's keys up to its own position.
  // Expanded (prefill) form: keys and values are expanded from the latent rows through kv_b.
  virtual void MlaAttentionExpanded(const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                                    std::span<const SeqAttention> seqs, const MlaShape& shape,
                                    const Tensor& out) = 0;
  // Absorbed (decode) form: kv_b's key part is folded into the query and its value part applied
  // after attention, so attention runs directly over the latent rows.
  virtual void MlaAttentionAbsorbed(const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                                    std::span<const SeqAttention> seqs, const MlaShape& shape,
                                    const Tensor& out) = 0;
  // Copies rows `indices` of x [n, d] into out [len(indices), d].
  virtual void GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out) = 0;
  // Copies a device tensor to host memory (fp32 in, fp32 out).
  virtual void CopyToHost(const Tensor& src, float* dst) = 0;
  // Uploads host fp32 values into a backend tensor of the same element count.
  virtual void CopyFromHost(const float* src, const Tensor& dst) = 0;
  // Uploads dst.bytes() raw bytes (FP8 codes kept as they are stored).
  virtual void CopyBytesFromHost(const void* src, const Tensor& dst) = 0;
  // Chooses a token for each of `rows` from fp32 logits [n, vocab] in this backend's memory (see
  // kernels/sampling.h; SampleOnHost is the reference). Only the results come back to the host.
  virtual void Sample(const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out) = 0;

  // Captured steps (kernels/step_graph.h); a backend without them returns null from both.
  // An input block of `bytes` bytes.
  virtual std::unique_ptr<GraphInputs> MakeGraphInputs(std::size_t /*bytes*/) { return nullptr; }
  // Runs `step` once as usual (first uses set up what capture cannot: library handles, tables,
  // function attributes), then again while capturing, and returns the captured graph. The device
  // copy of `inputs` is filled from its host memory first. An Error, with nothing captured, when
  // an operation cannot be captured.
  virtual std::unique_ptr<StepGraph> CaptureGraph(GraphInputs& /*inputs*/, const std::function<void()>& /*step*/) {
    return nullptr;
  }
};

std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace fission::kernels
