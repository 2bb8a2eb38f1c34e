#include "model/arch/deepseek_v3.h"

namespace fission::model {

DeepseekV3Model::DeepseekV3Model(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options)
    : DecoderModel(std::move(config), loader.backend(), options) {
  const io::ModelConfig& c = this->config();
  Buffer embed = LoadDeepseekEmbedding(loader);
  const RopeTables rope = ComputeRope(c);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers_.emplace_back(c, i, loader, rope, options.rank, options.latent_format);
  LoadDeepseekHead(loader, std::move(embed));
  if (options.load_draft) LoadDraft(loader, rope);
}

void DeepseekV3Model::LoadDraft(WeightLoader& loader, const RopeTables& rope) {
  const ShardOptions& o = options();
  const std::string prefix = StrCat("model.layers.", o.draft_layer, ".");
  if (o.draft_checkpoint == nullptr) {
    SetDraft(std::make_unique<NextnLayer>(config(), prefix, loader, rope, o.rank, o.latent_format, o.kv_dtype));
    return;
  }
  WeightLoader draft_loader = loader.ForCheckpoint(o.draft_checkpoint);
  SetDraft(std::make_unique<NextnLayer>(config(), prefix, draft_loader, rope, o.rank, o.latent_format, o.kv_dtype));
}

MemorySpec DeepseekV3Model::Memory() const {
  return WithDraftMemory({{MlaLatentClass(config(), options().latent_format, options().kv_dtype,
                                          static_cast<std::int32_t>(layers_.size()))}});
}

Buffer DeepseekV3Model::Hidden(const StepContext& step) {
  Allocator* alloc = step.backend->allocator();
  const std::int64_t n = step.layout->rows(), hidden = config().hidden_size;
  Buffer h(DType::kF32, Shape{n, hidden}, alloc), x(DType::kF32, Shape{n, hidden}, alloc),
      y(DType::kF32, Shape{n, hidden}, alloc);
  Embed(step, h);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const DeepseekLayer& layer = layers_[i];
    const auto attend = [&](const Tensor& in, const Tensor& out) {
      layer.attention->Forward(step, in, step.memory->entries(0, static_cast<int>(i)), out);
    };
    layer.Forward(step, h, x, y, attend, /*residual_in_y=*/i > 0);
  }
  if (!layers_.empty()) step.backend->Add(h, y, h);  // the last layer's feed-forward
  return h;
}

}  // namespace fission::model
