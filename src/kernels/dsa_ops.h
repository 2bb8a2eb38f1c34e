// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5.x): the lightning indexer's key cache, its
// scoring and top-k selection, and MLA restricted to the selected keys. Grouped behind one
// accessor (Backend::dsa()) like the MLA operations.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/mla_ops.h"
#include "tensor/tensor.h"

namespace fission::kernels {

// How the indexer's keys are stored. kExact: one fp32 or bf16 row of head_dim values per token
// (the parity tests' mode). kFp8: as production engines store them, head_dim e4m3 codes followed by
// one fp32 scale per token (4 bytes, unaligned), in a U8 cache of head_dim + 4 bytes per token.
enum class IndexKeyFormat : std::uint8_t { kExact, kFp8 };

// A row x[0, n) quantized to e4m3 with one scale: scale = max(amax, 1e-4) / 448 and
// code = e4m3(x / scale), rounded to nearest even and saturated (the activation rule of the FP8
// Linear). Both the keys and, for an fp8 cache, the queries (per row and head) use it.
inline constexpr float kIndexFp8MinAmax = 1e-4f;

struct IndexerShape {
  std::int64_t n_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t topk = 0;
  // Multiplies every head weight: index_n_heads^-0.5 · index_head_dim^-0.5.
  float weight_scale = 1.0f;
  std::int64_t page_size = 0;
  IndexKeyFormat key_format = IndexKeyFormat::kExact;
  // Positions a key covers: 1 (DSA: one key per token) or a compressor's ratio (DeepSeek-V4's CSA:
  // key e pools positions [e·ratio, (e+1)·ratio), in a paged class of that many tokens per entry).
  // A query at position p sees keys [0, (p + 1) / tokens_per_entry).
  std::int64_t tokens_per_entry = 1;
};

class DsaOps {
 public:
  virtual ~DsaOps() = default;
  // Stores keys [n, head_dim] (fp32) in rows `slots` of `cache` (a slot of -1 skips its row):
  // exact caches are [slots, head_dim] of fp32 or bf16, fp8 caches U8 [slots, head_dim + 4].
  virtual void WriteIndexKeys(const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                              const IndexerShape& shape) = 0;
  // The indexer's selection for every query row of `seqs`. q: [n, n_heads, head_dim] fp32 (rope
  // applied), weights: [n, n_heads] fp32 (the head weights before weight_scale). A query at
  // position p sees the keys at positions [0, p] of its sequence:
  //   score[s] = Σ_h weight_scale · weights[t, h] · ReLU(q[t, h] · key[s])
  // and topk [n, topk] (I32) receives the positions of the `topk` highest scores, highest first,
  // equal scores in position order. A query that sees at most `topk` keys selects them all, in
  // position order, without scoring; entries past the selection are -1. With an fp8 cache each
  // (row, head) of q is quantized by the rule above and the dot product is
  // q_scale · key_scale · (q_codes · key_codes). Rows outside `seqs` are left as they are. With
  // tokens_per_entry > 1 the keys are entries and topk receives entry indices.
  virtual void IndexerTopK(const Tensor& q, const Tensor& weights, const Tensor& cache,
                           std::span<const SeqAttention> seqs, const IndexerShape& shape, const Tensor& topk) = 0;
  // MLA attention (kernels/mla_ops.h) of each query row over only the cache positions it selected,
  // topk[row, j] for the entries j that are not -1 (all at or before the row's position).
  // `absorbed` picks the decode form, otherwise the expanded (prefill) form.
  virtual void SparseMla(const Tensor& q, const Tensor& cache, const Tensor& kv_b, const Tensor& topk,
                         std::span<const SeqAttention> seqs, const MlaShape& shape, bool absorbed,
                         const Tensor& out) = 0;
};

// Elements (exact) or bytes (fp8) of one token's key in a cache of `format`.
inline std::int64_t IndexKeyWidth(IndexKeyFormat format, std::int64_t head_dim) {
  return format == IndexKeyFormat::kFp8 ? head_dim + 4 : head_dim;
}

}  // namespace fission::kernels
