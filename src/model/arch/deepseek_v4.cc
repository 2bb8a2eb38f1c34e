#include "model/arch/deepseek_v4.h"

#include "model/layers/lightning_indexer.h"

namespace fission::model {
namespace {

constexpr const char* kWindow = "v4_window";
constexpr const char* kCsaEntries = "v4_csa_entries";
constexpr const char* kCsaIndexKeys = "v4_csa_index_keys";
constexpr const char* kCsaState = "v4_csa_state";
constexpr const char* kCsaIndexState = "v4_csa_index_state";
constexpr const char* kHcaEntries = "v4_hca_entries";
constexpr const char* kHcaState = "v4_hca_state";

// A class of `layers` copies: paged at one entry per `n` positions, or `n` entries per request.
CacheClass Class(const char* name, CacheKind kind, std::int64_t n, int layers, std::vector<CacheField> fields) {
  CacheClass c;
  c.name = name;
  c.kind = kind;
  (kind == CacheKind::kPaged ? c.tokens_per_entry : c.entries_per_request) = static_cast<std::int32_t>(n);
  c.layers = layers;
  c.fields = std::move(fields);
  return c;
}
CacheClass Paged(const char* name, std::int64_t ratio, int layers, std::vector<CacheField> fields) {
  return Class(name, CacheKind::kPaged, ratio, layers, std::move(fields));
}
CacheClass PerRequest(const char* name, std::int64_t entries, int layers, std::vector<CacheField> fields) {
  return Class(name, CacheKind::kPerRequest, entries, layers, std::move(fields));
}

kernels::V4KvFormat KvFormatOf(const ShardOptions& options) {
  return options.latent_format == kernels::LatentFormat::kFp8 ? kernels::V4KvFormat::kFp8 : kernels::V4KvFormat::kExact;
}

}  // namespace

DeepseekV4Model::DeepseekV4Model(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options)
    : DecoderModel(std::move(config), loader.backend(), options) {
  const io::ModelConfig& c = this->config();
  const io::V4Config& v4 = *c.v4;
  Buffer embed = loader.Load("embed.weight", Shape{c.vocab_size, c.hidden_size}, vocab_part());
  const RopeTables main_rope = ComputeRope(v4.main_rope, c.qk_rope_head_dim);
  const RopeTables compress_rope = ComputeRope(v4.compress_rope, c.qk_rope_head_dim);
  std::vector<std::int64_t> ratios, rings;
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = StrCat("layers.", i, ".");
    Layer& layer = layers_.emplace_back();
    layer.attn_norm = loader.LoadNorm(p + "attn_norm.weight", c.hidden_size);
    layer.ffn_norm = loader.LoadNorm(p + "ffn_norm.weight", c.hidden_size);
    layer.attn_hc = std::make_unique<HyperConnection>(c, p + "hc_attn_", loader);
    layer.ffn_hc = std::make_unique<HyperConnection>(c, p + "hc_ffn_", loader);
    layer.attention =
        std::make_unique<V4Attention>(c, i, loader, options.rank, main_rope, compress_rope, KvFormatOf(options),
                                    options.index_keys);
    layer.moe = std::make_unique<V4Moe>(c, i, loader, options.rank);
    if (layer.attention->kind() == io::V4Attention::kCsa) layer.csa = csa_layers_++;
    if (layer.attention->kind() == io::V4Attention::kHca) layer.hca = hca_layers_++;
    if (layer.attention->ratio() > 0) ratios.push_back(layer.attention->ratio());
    for (std::int64_t ring : layer.attention->state_rings()) rings.push_back(ring);
  }
  auto planner = std::make_unique<V4StepPlanner>(v4.sliding_window, ratios, rings, options.rank.cp_size());
  planner_ = planner.get();
  SetFamilyInputs(std::move(planner));
  head_ = std::make_unique<HyperHead>(c, loader);
  Buffer norm = loader.LoadNorm("norm.weight", c.hidden_size);
  Buffer lm_head = loader.Load(c.tie_word_embeddings ? "embed.weight" : "head.weight",
                               Shape{c.vocab_size, c.hidden_size}, vocab_part());
  SetVocabulary(std::move(embed), std::move(norm), static_cast<float>(c.rms_norm_eps), Weight::Plain(std::move(lm_head)));
}

MemorySpec V4MemorySpec(const io::ModelConfig& c, kernels::V4KvFormat format, kernels::IndexKeyFormat index_keys,
                        DType kv_dtype) {
  const io::V4Config& v4 = *c.v4;
  // A key or entry: head_dim values exactly, or kernels::V4KvFormat::kFp8's packed fields.
  const std::int64_t d = v4.head_dim, rope = c.qk_rope_head_dim;
  const std::vector<CacheField> kv =
      format == kernels::V4KvFormat::kFp8
          ? std::vector<CacheField>{{"nope_codes", DType::kF8E4M3, d - rope},
                                    {"nope_scales", DType::kU8, kernels::V4KvScaleCount(d - rope)},
                                    {"rope", DType::kBF16, rope}}
          : std::vector<CacheField>{{"kv", kv_dtype, d}};
  // The carry-over of a compressor: kv and gate of each kept position, fp32.
  auto state = [](std::int64_t width) { return std::vector<CacheField>{{"kv_gate", DType::kF32, 2 * width}}; };
  int csa = 0, hca = 0;
  std::int64_t csa_ratio = 0, hca_ratio = 0;
  for (std::size_t i = 0; i < v4.attention.size(); ++i) {
    if (v4.attention[i] == io::V4Attention::kCsa) {
      ++csa;
      csa_ratio = v4.compress_ratio[i];
    } else if (v4.attention[i] == io::V4Attention::kHca) {
      ++hca;
      hca_ratio = v4.compress_ratio[i];
    }
  }
  MemorySpec spec;
  spec.classes.push_back(PerRequest(kWindow, v4.sliding_window, static_cast<int>(v4.attention.size()), kv));
  if (csa > 0) {
    spec.classes.push_back(Paged(kCsaEntries, csa_ratio, csa, kv));
    spec.classes.push_back(
        Paged(kCsaIndexKeys, csa_ratio, csa, LightningIndexer::KeyFields(c, index_keys, DType::kF32)));
    spec.classes.push_back(PerRequest(kCsaState, 2 * csa_ratio, csa, state(2 * d)));
    spec.classes.push_back(PerRequest(kCsaIndexState, 2 * csa_ratio, csa, state(2 * c.indexer->head_dim)));
  }
  if (hca > 0) {
    spec.classes.push_back(Paged(kHcaEntries, hca_ratio, hca, kv));
    spec.classes.push_back(PerRequest(kHcaState, hca_ratio, hca, state(d)));
  }
  return spec;
}

MemorySpec DeepseekV4Model::Memory() const {
  return V4MemorySpec(config(), KvFormatOf(options()), options().index_keys, options().kv_dtype);
}

V4LayerMemory DeepseekV4Model::LayerMemory(const ModelMemory& memory, const Layer& layer, std::size_t index) const {
  const MemorySpec& spec = memory.spec();
  V4LayerMemory m;
  m.window = memory.entries(spec.index_of(kWindow), static_cast<int>(index));
  if (layer.csa >= 0) {
    m.entries = memory.entries(spec.index_of(kCsaEntries), layer.csa);
    m.index_keys = memory.entries(spec.index_of(kCsaIndexKeys), layer.csa);
    m.state = memory.entries(spec.index_of(kCsaState), layer.csa);
    m.index_state = memory.entries(spec.index_of(kCsaIndexState), layer.csa);
  } else if (layer.hca >= 0) {
    m.entries = memory.entries(spec.index_of(kHcaEntries), layer.hca);
    m.state = memory.entries(spec.index_of(kHcaState), layer.hca);
  }
  return m;
}

Buffer DeepseekV4Model::Hidden(const StepContext& step) {
  kernels::Backend& b = *step.backend;
  Allocator* alloc = b.allocator();
  const io::ModelConfig& c = config();
  const std::int64_t n = step.layout->rows(), hidden = c.hidden_size, m = c.v4->hc_mult;
  const V4StepPlan plan = planner_->Read(*step.in);
  Buffer x(DType::kF32, Shape{n, hidden}, alloc), y(DType::kF32, Shape{n, hidden}, alloc),
      collapsed(DType::kF32, Shape{n, hidden}, alloc);
  Buffer streams(DType::kF32, Shape{n, m, hidden}, alloc), next(DType::kF32, Shape{n, m, hidden}, alloc);
  Buffer post(DType::kF32, Shape{n, m}, alloc), comb(DType::kF32, Shape{n, m, m}, alloc);
  Embed(step, x);
  b.v4().ExpandStreams(x, streams);
  const float eps = static_cast<float>(c.rms_norm_eps);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    layer.attn_hc->Before(b, streams, collapsed, post, comb);
    b.RmsNorm(collapsed, layer.attn_norm, eps, x);
    layer.attention->Forward(step, x, plan, LayerMemory(*step.memory, layer, i), y);
    layer.attn_hc->After(b, y, post, comb, streams, next);
    std::swap(streams, next);

    layer.ffn_hc->Before(b, streams, collapsed, post, comb);
    b.RmsNorm(collapsed, layer.ffn_norm, eps, x);
    step.layout->FeedForward(x, y, [&](const Tensor& in, const Tensor& partial) {
      layer.moe->Forward(b, in, plan.moe_token_ids, partial);
    });
    layer.ffn_hc->After(b, y, post, comb, streams, next);
    std::swap(streams, next);
  }
  head_->Forward(b, streams, x);
  return x;
}

}  // namespace fission::model
