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
  // Its slot in the model's per-request classes (-1: none).
  std::int32_t state_slot = -1;
  // The sequence's new tokens in the step's token order (the rows TokenLayout::KvRowsOfAllTokens
  // returns): all of them, whichever this rank's queries are. Equal to query_start and query_len
  // in an unsplit step.
  std::int32_t token_start = 0;
  std::int32_t new_tokens = 0;
};

// The cache slot of entry `e` of a sequence with block table `table` in a paged class of `per`
// positions per entry: the entry lives in the page of its first position, which holds
// max(1, page_size / per) entries (model/memory_spec.h). `per` 1 is one entry per token.
inline std::int64_t EntrySlot(std::span<const std::int32_t> table, std::int64_t page_size, std::int64_t per,
                              std::int64_t e) {
  const std::int64_t first = e * per, per_page = page_size / per > 1 ? page_size / per : 1;
  return table[first / page_size] * per_page + (first % page_size) / per;
}

// How the latent cache stores a token's row [kv_lora_rank | rope]. kExact: the row as it is, in the
// cache tensor's dtype (fp32 or bf16). kFp8 (--kv-cache-dtype fp8_e4m3), FlashMLA's FP8 layout: the
// latent as e4m3 codes with one fp32 scale per 128 values (scale = max(amax, 1e-4) / 448, the rule
// of the FP8 activations; a shorter last group has its own), then the rope part in bf16, packed in a
// U8 cache of LatentEntryBytes per token (656 bytes for DeepSeek's 512 + 64).
enum class LatentFormat : std::uint8_t { kExact, kFp8 };

inline constexpr std::int64_t kLatentFp8Group = 128;

inline std::int64_t LatentScaleCount(std::int64_t kv_lora_rank) {
  return (kv_lora_rank + kLatentFp8Group - 1) / kLatentFp8Group;
}
inline std::int64_t LatentEntryBytes(std::int64_t kv_lora_rank, std::int64_t rope) {
  return kv_lora_rank + 4 * LatentScaleCount(kv_lora_rank) + 2 * rope;
}

struct MlaShape {
  std::int64_t num_heads = 0;  // heads computed here (the local heads under tensor parallelism)
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t kv_lora_rank = 0;
  float softmax_scale = 1.0f;
  std::int64_t page_size = 0;
  LatentFormat latent_format = LatentFormat::kExact;
};

// The rotary embedding of a step's rows as Backend::Rope applies it.
struct RopeArgs {
  std::span<const std::int32_t> positions;  // one per row
  Tensor inv_freq;                          // [rope / 2] fp32
  float scaling = 1.0f;
  bool interleaved = false;
};

class MlaOps {
 public:
  virtual ~MlaOps() = default;
  // The joint down-projection a = x · [q_a_proj; kv_a_proj_with_mqa]ᵀ [n, q_lora + kv_lora + rope]
  // (fp32) split into the normalised query latent q_latent [n, q_lora] and the latent row kv_row
  // [n, kv_lora + rope]: each latent RMS-normalised by its weight, the rope key rotated. The values
  // of RmsNorm on each part and Rope on the key (as Backend defines them), in one pass over a.
  virtual void SplitLatents(const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps,
                            const RopeArgs& rope, const Tensor& q_latent, const Tensor& kv_row) = 0;
  // Stores latent rows [n, kv_lora_rank + rope] (fp32) in rows `slots` of the cache in the shape's
  // format (a slot of -1 skips its row).
  virtual void WriteLatent(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                           const MlaShape& shape) = 0;
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
