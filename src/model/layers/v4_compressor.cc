#include "model/layers/v4_compressor.h"

#include "model/layers/lightning_indexer.h"

namespace fission::model {

V4Compressor::V4Compressor(const io::ModelConfig& c, const std::string& prefix, std::int64_t head_dim,
                           std::int64_t ratio, bool overlap, WeightLoader& loader, const RopeTables& rope)
    : rope_dim_(c.qk_rope_head_dim), norm_eps_(static_cast<float>(c.rms_norm_eps)) {
  shape_.ratio = ratio;
  shape_.head_dim = head_dim;
  shape_.overlap = overlap;
  const std::int64_t width = shape_.width();
  wkv_ = loader.LoadLinear(prefix + "wkv.weight", Shape{width, c.hidden_size});
  wgate_ = loader.LoadLinear(prefix + "wgate.weight", Shape{width, c.hidden_size});
  ape_ = loader.LoadF32(prefix + "ape", Shape{ratio, width});
  norm_ = loader.LoadNorm(prefix + "norm.weight", head_dim);
  inv_freq_ = UploadInvFreq(rope, loader.backend());
}

Buffer V4Compressor::Pool(const StepContext& step, const Tensor& x, const V4StepPlan& plan,
                          const Tensor& state) const {
  kernels::Backend& b = *step.backend;
  const V4Windows& windows = plan.closed.at(shape_.ratio);
  const std::int64_t n = x.shape[0], width = shape_.width(), m = static_cast<std::int64_t>(windows.windows.size());
  Buffer kv_own(DType::kF32, Shape{n, width}, b.allocator()), gate_own(DType::kF32, Shape{n, width}, b.allocator());
  b.Linear(x, wkv_, kv_own);
  b.Linear(x, wgate_, gate_own);
  // Every rank pools every window from the projections of all the step's tokens.
  Buffer kv_all, gate_all;
  const Tensor kv = step.layout->KvRowsOfAllTokens(kv_own, &kv_all);
  const Tensor gate = step.layout->KvRowsOfAllTokens(gate_own, &gate_all);
  Buffer pooled;
  if (m > 0) {
    pooled = Buffer(DType::kF32, Shape{m, shape_.head_dim}, b.allocator());
    b.v4().Compress(kv, gate, ape_, state, windows.windows, shape_, pooled);
    b.RmsNorm(pooled, norm_, norm_eps_, pooled);
    b.v4().Rope(pooled.tensor().View(Shape{m, 1, shape_.head_dim}), shape_.head_dim - rope_dim_, rope_dim_,
                windows.positions, inv_freq_, /*inverse=*/false);
  }
  b.v4().UpdateCompressorState(kv, gate, state, plan.ring(shape_.state_positions()), shape_);
  return pooled;
}

V4Indexer::V4Indexer(const io::ModelConfig& c, const std::string& prefix, std::int64_t ratio, WeightLoader& loader,
                     const RopeTables& rope, kernels::IndexKeyFormat key_format)
    : rope_dim_(c.qk_rope_head_dim),
      compressor_(c, prefix + "compressor.", c.indexer->head_dim, ratio, /*overlap=*/true, loader, rope) {
  const io::IndexerConfig& idx = *c.indexer;
  shape_ = IndexerShapeOf(c);
  shape_.tokens_per_entry = ratio;
  shape_.key_format = key_format;
  wq_b_ = loader.LoadLinear(prefix + "wq_b.weight", Shape{idx.n_heads * idx.head_dim, c.q_lora_rank});
  weights_proj_ = Weight::Plain(loader.Load(prefix + "weights_proj.weight", Shape{idx.n_heads, c.hidden_size}));
  inv_freq_ = UploadInvFreq(rope, loader.backend());
}

void V4Indexer::Select(const StepContext& step, const Tensor& x, const Tensor& q_latent, const V4StepPlan& plan,
                       const Tensor& state, const Tensor& keys, const Tensor& selection) const {
  kernels::Backend& b = *step.backend;
  const std::int64_t n = x.shape[0];
  kernels::IndexerShape shape = shape_;
  shape.page_size = step.in->page_size;
  const Buffer new_keys = compressor_.Pool(step, x, plan, state);
  if (!new_keys.empty()) b.dsa().WriteIndexKeys(new_keys, plan.closed.at(compressor_.ratio()).slots, keys, shape);
  Buffer q(DType::kF32, Shape{n, shape_.n_heads, shape_.head_dim}, b.allocator());
  b.Linear(q_latent, wq_b_, q.tensor().View(Shape{n, shape_.n_heads * shape_.head_dim}));
  b.v4().Rope(q, shape_.head_dim - rope_dim_, rope_dim_, step.in->positions, inv_freq_, /*inverse=*/false);
  Buffer weights(DType::kF32, Shape{n, shape_.n_heads}, b.allocator());
  b.Linear(x, weights_proj_, weights);
  b.dsa().IndexerTopK(q, weights, keys, step.in->seqs, shape, selection);
}

}  // namespace fission::model
