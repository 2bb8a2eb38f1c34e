#include "model/layers/nextn_layer.h"

namespace fission::model {

NextnLayer::NextnLayer(const io::ModelConfig& c, const std::string& prefix, WeightLoader& loader,
                       const RopeTables& rope, const RankInfo& rank, kernels::LatentFormat latent_format,
                       DType kv_dtype)
    : config_(c),
      latent_format_(latent_format),
      kv_dtype_(kv_dtype),
      eps_(static_cast<float>(c.rms_norm_eps)),
      // DeepSeek-V3's NextN decoder layer is DeepSeekMoE whatever its index (SGLang builds it so).
      decoder_(c, prefix, c.n_routed_experts > 0, loader, rope, rank, latent_format) {
  const std::int64_t h = c.hidden_size;
  enorm_ = loader.LoadNorm(prefix + "enorm.weight", h);
  hnorm_ = loader.LoadNorm(prefix + "hnorm.weight", h);
  eh_embed_ = loader.LoadLinearCols(prefix + "eh_proj.weight", Shape{h, 2 * h}, {0, h});
  eh_hidden_ = loader.LoadLinearCols(prefix + "eh_proj.weight", Shape{h, 2 * h}, {h, 2 * h});
  shared_head_norm_ = loader.LoadNorm(prefix + "shared_head.norm.weight", h);
}

std::vector<CacheClass> NextnLayer::Memory() const {
  CacheClass latent = MlaLatentClass(config_, latent_format_, kv_dtype_, 1);
  latent.name = "nextn_latent";
  return {latent};
}

void NextnLayer::Forward(const StepContext& step, const Tensor& embedded, const Tensor& previous, int first_class,
                         const Tensor& out) const {
  kernels::Backend& b = *step.backend;
  Allocator* alloc = b.allocator();
  const Shape shape = embedded.shape;
  Buffer h(DType::kF32, shape, alloc), x(DType::kF32, shape, alloc), y(DType::kF32, shape, alloc);
  b.RmsNorm(embedded, enorm_, eps_, embedded);
  b.RmsNorm(previous, hnorm_, eps_, x);  // `previous` is only read (a graph's fixed input rows)
  b.Linear(embedded, eh_embed_, h);
  b.Linear(x, eh_hidden_, y);
  const Tensor cache = step.memory->entries(first_class, 0);
  // eh_proj is the sum of its two halves: the decoder adds the hidden half (y) inside its first
  // norm, and its own feed-forward inside the head's norm.
  decoder_.Forward(
      step, h, x, y,
      [&](const Tensor& in, const Tensor& attn_out) { decoder_.attention->Forward(step, in, cache, attn_out); },
      /*residual_in_y=*/true);
  b.AddRmsNorm(h, y, shared_head_norm_, eps_, out);
}

std::vector<std::string> NextnLayer::MissingTensors(const std::string& prefix,
                                                    const std::function<bool(const std::string&)>& has) {
  std::vector<std::string> missing;
  for (const char* name : {"enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
                           "input_layernorm.weight", "self_attn.kv_a_proj_with_mqa.weight", "mlp.gate.weight"})
    if (!has(prefix + name)) missing.push_back(prefix + name);
  return missing;
}

}  // namespace fission::model
