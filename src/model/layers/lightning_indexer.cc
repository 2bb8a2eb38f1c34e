#include "model/layers/lightning_indexer.h"

#include <cmath>

namespace fission::model {

// The key norm is an nn.LayerNorm with its default epsilon.
constexpr float kIndexKeyNormEps = 1e-6f;

LightningIndexer::LightningIndexer(const io::ModelConfig& c, const std::string& prefix, WeightLoader& loader,
                                   const RopeTables& rope, kernels::IndexKeyFormat key_format)
    : config_(c), key_format_(key_format), rope_scaling_(rope.attention_scaling) {
  const io::IndexerConfig& idx = *c.indexer;
  wq_b_ = loader.LoadLinear(prefix + "wq_b.weight", ::fission::Shape{idx.n_heads * idx.head_dim, c.q_lora_rank});
  wk_ = loader.LoadLinear(prefix + "wk.weight", ::fission::Shape{idx.head_dim, c.hidden_size});
  k_norm_weight_ = loader.LoadNorm(prefix + "k_norm.weight", idx.head_dim);
  k_norm_bias_ = loader.LoadBias(prefix + "k_norm.bias", idx.head_dim);
  // Checkpoints keep weights_proj unquantized (bf16).
  weights_proj_ = Weight::Plain(loader.Load(prefix + "weights_proj.weight", ::fission::Shape{idx.n_heads, c.hidden_size}));
  inv_freq_ = UploadInvFreq(rope, loader.backend());
}

std::vector<CacheField> LightningIndexer::KeyFields(const io::ModelConfig& c, kernels::IndexKeyFormat format,
                                                    DType exact_dtype) {
  const std::int64_t d = c.indexer->head_dim;
  if (format == kernels::IndexKeyFormat::kFp8) return {{"key_codes", DType::kF8E4M3, d}, {"key_scale", DType::kF32, 1}};
  return {{"key", exact_dtype, d}};
}

kernels::IndexerShape LightningIndexer::Shape(std::int64_t page_size) const {
  const io::IndexerConfig& idx = *config_.indexer;
  kernels::IndexerShape shape;
  shape.n_heads = idx.n_heads;
  shape.head_dim = idx.head_dim;
  shape.topk = idx.topk;
  shape.weight_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(idx.n_heads)) /
                                          std::sqrt(static_cast<double>(idx.head_dim)));
  shape.page_size = page_size;
  shape.key_format = key_format_;
  return shape;
}

void LightningIndexer::Select(const StepContext& step, const Tensor& x, const Tensor& q_latent,
                              const Tensor& key_cache, const Tensor& topk) const {
  kernels::Backend& b = *step.backend;
  Allocator* alloc = b.allocator();
  const StepView& in = *step.in;
  const io::IndexerConfig& idx = *config_.indexer;
  const std::int64_t n = x.shape[0], rope = config_.qk_rope_head_dim;
  const bool interleaved = idx.rope_interleave;
  const kernels::IndexerShape shape = Shape(in.page_size);

  // Keys of this rank's tokens, then of every token of the step into the cache.
  Buffer key(DType::kF32, ::fission::Shape{n, 1, idx.head_dim}, alloc);
  b.Linear(x, wk_, key.tensor().View(::fission::Shape{n, idx.head_dim}));
  b.LayerNorm(key, k_norm_weight_, k_norm_bias_, kIndexKeyNormEps, key);
  b.Rope(key, 0, rope, in.positions, inv_freq_, rope_scaling_, interleaved);
  Buffer gathered;
  b.dsa().WriteIndexKeys(step.layout->KvRowsOfAllTokens(key, &gathered), in.kv_slots, key_cache, shape);

  // Queries and head weights of this rank's rows only.
  Buffer q(DType::kF32, ::fission::Shape{n, idx.n_heads, idx.head_dim}, alloc);
  b.Linear(q_latent, wq_b_, q.tensor().View(::fission::Shape{n, idx.n_heads * idx.head_dim}));
  b.Rope(q, 0, rope, in.positions, inv_freq_, rope_scaling_, interleaved);
  Buffer weights(DType::kF32, ::fission::Shape{n, idx.n_heads}, alloc);
  b.Linear(x, weights_proj_, weights);
  b.dsa().IndexerTopK(q, weights, key_cache, in.seqs, shape, topk);
}

}  // namespace fission::model
