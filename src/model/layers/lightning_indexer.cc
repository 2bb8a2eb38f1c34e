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

kernels::IndexerShape IndexerShapeOf(const io::ModelConfig& c) {
  const io::IndexerConfig& idx = *c.indexer;
  kernels::IndexerShape shape;
  shape.n_heads = idx.n_heads;
  shape.head_dim = idx.head_dim;
  shape.topk = idx.topk;
  shape.weight_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(idx.n_heads)) /
                                          std::sqrt(static_cast<double>(idx.head_dim)));
  return shape;
}

kernels::IndexerShape LightningIndexer::Shape(std::int64_t page_size) const {
  kernels::IndexerShape shape = IndexerShapeOf(config_);
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

  // Queries and head weights of the rows this rank scores: its own rows, or with the query split
  // its share of them, gathered compactly (the selections are gathered back below).
  const bool split = in.splits_indexer();
  Tensor qa = q_latent, xs = x;
  std::span<const std::int32_t> positions = in.positions;
  std::span<const kernels::SeqAttention> seqs = in.seqs;
  Buffer qa_own, x_own, topk_own;
  std::int64_t rows = n;
  if (split) {
    rows = static_cast<std::int64_t>(in.indexer_rows.size());
    qa_own = Buffer(DType::kF32, ::fission::Shape{rows, config_.q_lora_rank}, alloc);
    x_own = Buffer(DType::kF32, ::fission::Shape{rows, config_.hidden_size}, alloc);
    b.GatherRows(q_latent, in.indexer_rows, qa_own);
    b.GatherRows(x, in.indexer_rows, x_own);
    topk_own = Buffer(DType::kI32, ::fission::Shape{rows, idx.topk}, alloc);
    qa = qa_own;
    xs = x_own;
    positions = in.indexer_positions;
    seqs = in.indexer_seqs;
  }
  Buffer q(DType::kF32, ::fission::Shape{rows, idx.n_heads, idx.head_dim}, alloc);
  b.Linear(qa, wq_b_, q.tensor().View(::fission::Shape{rows, idx.n_heads * idx.head_dim}));
  b.Rope(q, 0, rope, positions, inv_freq_, rope_scaling_, interleaved);
  Buffer weights(DType::kF32, ::fission::Shape{rows, idx.n_heads}, alloc);
  b.Linear(xs, weights_proj_, weights);
  b.dsa().IndexerTopK(q, weights, key_cache, seqs, shape, split ? topk_own.tensor() : topk);
  if (split) step.layout->GatherIndexerSelection(topk_own, topk);
}

}  // namespace fission::model
