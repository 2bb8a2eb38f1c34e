// The lightning indexer of DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5.x). Per token it keeps
// one key, kI = LayerNorm(x · wk) with rope on its first qk_rope_head_dim dims; per query it
// scores every earlier key with index_n_heads small heads,
//   I[t, s] = Σ_h w_h(t) · ReLU(qI_h(t) · kI(s)),   qI = q_latent · wq_b (rope applied),
//   w = x · weights_proj · index_n_heads^-0.5 · index_head_dim^-0.5,
// and selects the index_topk highest, which MLA then attends (MlaAttention::ForwardSparse).
//
// Its weights are replicated on every tensor-parallel rank; under prefill context parallelism a
// rank scores only its own queries, against the keys of every token (gathered like MLA's latent
// rows, so every rank writes the whole key cache).
#pragma once

#include <string>

#include "io/model_config.h"
#include "model/layers/rope.h"
#include "model/memory_spec.h"
#include "model/step_context.h"
#include "model/weights.h"

namespace fission::model {

// The scoring shape of a config's indexer (heads, dims, top-k, and the head weights' scale
// index_n_heads^-0.5 · index_head_dim^-0.5); page size and key format are the caller's.
kernels::IndexerShape IndexerShapeOf(const io::ModelConfig& config);

class LightningIndexer {
 public:
  // Loads `prefix`wq_b, wk, k_norm (weight and bias) and weights_proj.
  LightningIndexer(const io::ModelConfig& config, const std::string& prefix, WeightLoader& loader,
                   const RopeTables& rope, kernels::IndexKeyFormat key_format);
  // x [rows, hidden] is the attention's input and q_latent [rows, q_lora_rank] MLA's normalised
  // query latent. Writes the key of every token of the step into `key_cache` and fills topk
  // [rows, index_topk] (I32) for this rank's queries.
  void Select(const StepContext& step, const Tensor& x, const Tensor& q_latent, const Tensor& key_cache,
              const Tensor& topk) const;

  // The key cache's entry: exact (`exact_dtype`, the KV cache's element type) or e4m3 codes and a
  // per-token fp32 scale.
  static std::vector<CacheField> KeyFields(const io::ModelConfig& config, kernels::IndexKeyFormat format,
                                           DType exact_dtype);

 private:
  kernels::IndexerShape Shape(std::int64_t page_size) const;

  const io::ModelConfig& config_;
  kernels::IndexKeyFormat key_format_;
  float rope_scaling_;
  Buffer inv_freq_;
  Weight wq_b_, wk_, weights_proj_;
  Buffer k_norm_weight_, k_norm_bias_;
};

}  // namespace fission::model
