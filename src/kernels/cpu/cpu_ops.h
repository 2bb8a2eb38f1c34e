// The CPU reference operations. fp32 in, fp32 out, fp32 accumulation in a fixed order: the same
// inputs give the same bits whatever the batch composition or the number of threads, because every
// output element is computed by one thread with one summation order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"

namespace fission::kernels::cpu {

// Σ a[i]·b[i] with 8 interleaved partial sums, combined in a fixed order.
float Dot(const float* a, const float* b, std::int64_t n);

void Linear(const Tensor& x, const Tensor& w, const Tensor& out);
// FP8 block-scaled Linear (see Backend::LinearFp8) and its activation quantizer: codes[k] and one
// scale per 128-wide group of one token row.
void LinearFp8(const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out);
void QuantizeFp8PerTokenGroup(const float* x, std::int64_t k, std::uint8_t* codes, float* scales);
// Linear on a weight of another block-quantized format (per-channel FP8, MXFP8, MXFP4, weight-only
// MXFP4): the weight decoded exactly, each token's activations quantized by the format's rule
// (tensor/quantize.h; none for a weight-only format).
void LinearQuantized(const Tensor& x, const WeightView& w, const Tensor& out);
void Embedding(const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start, const Tensor& out);
void Zero(const Tensor& x);
void RmsNorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
void Add(const Tensor& a, const Tensor& b, const Tensor& out);
// silu(gate) · up; with `limit` > 0 the gate is clamped above and up to [-limit, limit] first.
void SiluMul(const Tensor& gate_up, const Tensor& out, float limit = 0.0f);
void Rope(const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim, std::span<const std::int32_t> positions,
          const Tensor& inv_freq, float scaling, bool interleaved);
void WriteKv(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache);
void GatherRows(const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out);

// Indices of the k largest values, larger first; ties keep the lower index first.
std::vector<std::int32_t> TopK(const std::vector<float>& values, std::int64_t k);
void MoeRoute(const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing, const Tensor& topk_ids,
              const Tensor& topk_weights);
// Routed experts of any format the CPU has (plain, FP8 blocks, LinearQuantized's), each expert's
// activation SiluMul with `limit`.
void MoeExperts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit, const Tensor& out);

// MLA over every key a query sees, or, with `topk` [n, k] (I32, -1 ends a row's list), over the
// positions each row selected (Backend::dsa().SparseMla).
void MlaAttentionExpanded(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                          const MlaShape& shape, const Tensor& out, const Tensor& topk = {});
void MlaAttentionAbsorbed(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                          const MlaShape& shape, const Tensor& out, const Tensor& topk = {});

// MlaOps::WriteLatent: exact rows copied, fp8 rows quantized (kernels/mla_ops.h's layout).
void WriteLatent(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache, const MlaShape& shape);
// MlaOps::SplitLatents: copies of the two parts, RmsNorm on each, Rope on the key.
void SplitLatents(const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps, const RopeArgs& rope,
                  const Tensor& q_latent, const Tensor& kv_row);

void LayerNorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, const Tensor& out);
// The lightning indexer (Backend::dsa()).
void WriteIndexKeys(const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                    const IndexerShape& shape);
void IndexerTopK(const Tensor& q, const Tensor& weights, const Tensor& cache, std::span<const SeqAttention> seqs,
                 const IndexerShape& shape, const Tensor& topk);
// One scale for the whole row (kernels/dsa_ops.h's rule): codes[0, n) and the returned scale.
float QuantizeFp8Row(const float* x, std::int64_t n, std::uint8_t* codes);

}  // namespace fission::kernels::cpu
