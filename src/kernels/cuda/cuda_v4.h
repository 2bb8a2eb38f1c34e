// DeepSeek-V4's operations on CUDA (kernels/v4_ops.h says what each computes), behind
// CudaBackend::v4(). Activations, streams, compressor state and the step's keys are fp32 tensors
// and the arithmetic is fp32, one thread or warp per output element in a fixed order, so results
// differ from the CPU reference by summation order only; the one exception is attention at
// head_dim 512 over a bf16 or FP8 ring and entries, which runs on bf16 tensor cores (v4_flash.cu).
// Host spans are step metadata uploaded per call (ctx.Upload: inside a step-input block they
// resolve to its device copy, so a step whose metadata all lies there is capturable).
//   v4_streams.cu:   the mHC residual streams, V4's rope, the grouped output projection, routing.
//   v4_attention.cu: the compressors and attention over a sliding window plus compressed entries
//                    (v4_flash.cu: the tensor-core attention; v4_attention.cuh: what they share).
//   v4_storage.cu:   the window ring's and entries' storage formats (exact rows or packed FP8).
#pragma once

#include <cstdint>
#include <span>

#include "kernels/cuda/cuda_context.h"
#include "kernels/v4_ops.h"

namespace fission::kernels::cuda {

// v4_streams.cu
void V4ExpandStreams(CudaContext& ctx, const Tensor& x, const Tensor& out);
void V4HyperPre(CudaContext& ctx, const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                const HyperShape& shape, const Tensor& collapsed, const Tensor& post, const Tensor& comb);
void V4HyperPost(CudaContext& ctx, const Tensor& block_out, const Tensor& streams, const Tensor& post,
                 const Tensor& comb, const Tensor& out);
void V4HyperHead(CudaContext& ctx, const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                 const HyperShape& shape, const Tensor& out);
void V4Rope(CudaContext& ctx, const Tensor& x, std::int64_t offset, std::int64_t dim,
            std::span<const std::int32_t> positions, const Tensor& inv_freq, bool inverse);
void V4GroupedLinear(CudaContext& ctx, const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out);
void V4RouteSqrtSoftplus(CudaContext& ctx, const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                         std::span<const std::int32_t> token_ids, std::int64_t top_k, float scaling, const Tensor& ids,
                         const Tensor& weights);

// v4_attention.cu
void V4Compress(CudaContext& ctx, const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                std::span<const ClosedWindow> windows, const CompressorShape& shape, const Tensor& pooled);
void V4UpdateCompressorState(CudaContext& ctx, const Tensor& kv, const Tensor& gate, const Tensor& state,
                             std::span<const std::int64_t> slots, const CompressorShape& shape);
void V4Attention(CudaContext& ctx, const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                 const Tensor& selection, const Tensor& sinks, const V4Queries& queries,
                 const V4AttentionShape& shape, const Tensor& out);

// v4_storage.cu
void V4RoundToStorage(CudaContext& ctx, const Tensor& rows, std::int64_t rope_dim);
void V4WriteEntries(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                    V4KvFormat format, std::int64_t rope_dim);

}  // namespace fission::kernels::cuda
