// Multi-head latent attention (DeepSeek-V2/V3). Each token's KV is one latent row
// [kv_lora_rank normalised latent | qk_rope_head_dim rotated key], written to the paged cache;
// attention runs in the expanded form for prefill and the absorbed form for decode.
#pragma once

#include <optional>
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
  // A step's latents of x [rows, hidden]: the normalised query latent q_a_layernorm(q_a_proj(x))
  // [rows, q_lora_rank] (empty without a query LoRA), which DeepSeek Sparse Attention's indexer
  // reads too, and the latent row [rows, 1, kv_lora_rank + rope] (normalised, key rotated) that
  // attention writes into the cache.
  struct Latents {
    Buffer q_latent;
    Buffer kv_row;
  };
  Latents Project(const StepContext& step, const Tensor& x) const;
  // Forward from the latents of Project, attending only the positions each row selected in `topk`
  // [rows, k] (kernels/dsa_ops.h's SparseMla); the model must have a query LoRA.
  void ForwardSparse(const StepContext& step, const Tensor& x, const Latents& latents, const Tensor& cache,
                     const Tensor& topk, const Tensor& out) const;
  std::int64_t kv_row_width() const { return shape_.kv_lora_rank + shape_.qk_rope_head_dim; }
  // The latent cache's entry in `format`: one row of `exact_dtype`, or FP8 codes, scales and the
  // bf16 rope part (kernels/mla_ops.h).
  static std::vector<CacheField> LatentFields(const io::ModelConfig& config, kernels::LatentFormat format,
                                              DType exact_dtype);

 private:
  // q [rows, heads, qk_head_dim] (rope not yet applied) from the query latent, or from x without one.
  Buffer Query(kernels::Backend& b, const Tensor& x, const Latents& latents) const;
  // The rest of Forward once q is projected: the latent rows into the cache, attention, o_proj;
  // `topk` empty attends every visible key.
  void Attend(const StepContext& step, const Tensor& x, const Tensor& q, const Tensor& kv_row, const Tensor& cache,
              const Tensor& topk, const Tensor& out) const;

  const io::ModelConfig& config_;
  kernels::MlaShape shape_;
  bool rope_interleave_;
  float rope_scaling_;
  Buffer inv_freq_;
  // Projections may be FP8 (their Weight says); kv_b_proj is read by the attention kernels
  // themselves, so it is always a plain matrix. With a query LoRA, q_a_proj and kv_a_proj_with_mqa
  // are one matrix stacked by rows (lora_down_proj_: one product, one read of x) unless they load
  // in different formats.
  Weight q_a_proj_, q_b_proj_, q_proj_, kv_a_proj_, o_proj_;
  std::optional<Weight> lora_down_proj_;
  Buffer q_a_layernorm_, kv_a_layernorm_, kv_b_proj_;
};

}  // namespace fission::model
