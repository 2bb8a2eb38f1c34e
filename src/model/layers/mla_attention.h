// Multi-head latent attention (DeepSeek-V2/V3). Each token's KV is one latent row
// [kv_lora_rank normalised latent | qk_rope_head_dim rotated key], written to the paged cache;
// attention runs in the expanded form for prefill and the absorbed form for decode.
#pragma once

#include <string>

#include "io/model_config.h"
#include "model/step_context.h"
#include "model/layers/rope.h"
#include "model/memory_spec.h"
#include "model/weights.h"

namespace fission::model {

class MlaAttention {
 public:
  // Loads the heads this rank computes (all of them on a single rank); the cache stores latent
  // rows in `latent_format`.
  MlaAttention(const io::ModelConfig& config, const std::string& prefix, WeightLoader& loader,
               const RopeTables& rope, const RankInfo& rank, kernels::LatentFormat latent_format);
  // x [rows, hidden] (this rank's rows of the step) -> out [rows, hidden], summed over the
  // attention-TP group. Writes the latent rows of every token of the step into `cache`
  // [slots, width] (the token layout gathers them over the context-parallel group).
  void Forward(const StepContext& step, const Tensor& x, const Tensor& cache, const Tensor& out) const;
  // The normalised query latent q_a_layernorm(q_a_proj(x)) [rows, q_lora_rank], which DeepSeek
  // Sparse Attention's indexer reads too; the model must have a query LoRA.
  Buffer QueryLatent(kernels::Backend& b, const Tensor& x) const;
  // Forward from the query latent of QueryLatent, attending only the positions each row selected
  // in `topk` [rows, k] (kernels/dsa_ops.h's SparseMla).
  void ForwardSparse(const StepContext& step, const Tensor& x, const Tensor& q_latent, const Tensor& cache,
                     const Tensor& topk, const Tensor& out) const;
  std::int64_t kv_row_width() const { return shape_.kv_lora_rank + shape_.qk_rope_head_dim; }
  // The latent cache's entry in `format`: one row of `exact_dtype`, or FP8 codes, scales and the
  // bf16 rope part (kernels/mla_ops.h).
  static std::vector<CacheField> LatentFields(const io::ModelConfig& config, kernels::LatentFormat format,
                                              DType exact_dtype);

 private:
  // The rest of Forward once q [rows, heads, qk_head_dim] is projected (rope not yet applied);
  // `topk` empty attends every visible key.
  void Attend(const StepContext& step, const Tensor& x, const Tensor& q, const Tensor& cache, const Tensor& topk,
              const Tensor& out) const;

  const io::ModelConfig& config_;
  kernels::MlaShape shape_;
  bool rope_interleave_;
  float rope_scaling_;
  Buffer inv_freq_;
  // Projections may be FP8 (their Weight says); kv_b_proj is read by the attention kernels
  // themselves, so it is always a plain matrix.
  Weight q_a_proj_, q_b_proj_, q_proj_, kv_a_proj_, o_proj_;
  Buffer q_a_layernorm_, kv_a_layernorm_, kv_b_proj_;
};

}  // namespace fission::model
