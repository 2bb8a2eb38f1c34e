// The CUDA operations behind CudaBackend, one file per concept. Tensors live on the context's
// device; host spans are metadata uploaded per call.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda {

// elementwise.cu
void Convert(CudaContext& ctx, const Tensor& src, const Tensor& dst);  // fp32 <-> bf16 (or copy)
// Rows ids[i] - vocab_start of the table; zeros for ids outside it (vocab-parallel shards).
void Embedding(CudaContext& ctx, const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
               const Tensor& out);
void Zero(CudaContext& ctx, const Tensor& x);
void RmsNorm(CudaContext& ctx, const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
void Add(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out);
void SiluMul(CudaContext& ctx, const Tensor& gate_up, const Tensor& out);
void Rope(CudaContext& ctx, const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim,
          std::span<const std::int32_t> positions, const Tensor& inv_freq, float scaling, bool interleaved);
void WriteKv(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache);
void GatherRows(CudaContext& ctx, const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out);
// Device-index variant used inside other operations.
void GatherRowsDevice(CudaContext& ctx, const Tensor& x, const std::int32_t* indices, std::int64_t count,
                      const Tensor& out);

// gemm.cu
void Linear(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out);
// fp8.cu
void LinearFp8(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out);
// Per-token 1×128 quantization of x [n, k] to e4m3 codes [n, k] and fp32 scales, the scale of
// token i and group g at scales[i * token_stride + g * group_stride].
void QuantizeFp8(CudaContext& ctx, const Tensor& x, std::uint8_t* codes, float* scales, std::int64_t token_stride,
                 std::int64_t group_stride);

// mla_reference.cu: whether the tuned MLA kernels take this shape, and the fp32 reference kernel
// that takes any (contexts up to 8192 keys).
bool MlaTunedShape(const MlaShape& sh, bool absorbed);
void MlaAttentionReference(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                           std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out);

// moe.cu
void MoeRoute(CudaContext& ctx, const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing,
              const Tensor& topk_ids, const Tensor& topk_weights);
void MoeExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                std::span<const Tensor> gate_up, std::span<const Tensor> down, const Tensor& out);

// mla_attention.cu
void MlaAttentionExpanded(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& shape, const Tensor& out);
void MlaAttentionAbsorbed(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& shape, const Tensor& out);

// sampling.cu
void Sample(CudaContext& ctx, const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out);

}  // namespace fission::kernels::cuda
