// Multi-head latent attention (DeepSeek-V2/V3 and the families built on it): the attention
// operations of one family, grouped so that Backend holds one accessor for them (Backend::mla()).
#pragma once

#include <cstdint>
#include <span>

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
  // The sequence's only new token in an unsplit step (a decode), which the model may run in a
  // decode form of its attention.
  bool decode = false;
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

class MlaOps {
 public:
  virtual ~MlaOps() = default;
  // MLA attention over a latent cache of rows [kv_lora_rank | rope] per token.
  // q: [n, heads, nope + rope] with rope already applied; kv_b: [heads·(nope + v), kv_lora_rank];
  // out: [n, heads, v]. Each query attends its sequence's keys up to its own position.
  // Expanded (prefill) form: keys and values are expanded from the latent rows through kv_b.
  virtual void Expanded(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                        const MlaShape& shape, const Tensor& out) = 0;
  // Absorbed (decode) form: kv_b's key part is folded into the query and its value part applied
  // after attention, so attention runs directly over the latent rows.
  virtual void Absorbed(const Tensor& q, const Tensor& cache, const Tensor& kv_b, std::span<const SeqAttention> seqs,
                        const MlaShape& shape, const Tensor& out) = 0;
};

}  // namespace fission::kernels
