#include "model/deepseek_v3.h"

#include <chrono>
#include <cstring>

#include "base/log.h"

namespace fission::model {

DeepseekV3Model::DeepseekV3Model(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options)
    : config_(std::move(config)), backend_(loader.backend()), options_(options) {
  graph_sizes_ = CudaGraphSizes(options.cuda_graphs);
  const io::ModelConfig& c = config_;
  const RankInfo& rank = options.rank;
  vocab_part_ = EvenPart(c.vocab_size, rank.attn_tp_size(), rank.attn_tp_rank(), "vocab_size");
  embed_tokens_ = loader.Load("model.embed_tokens.weight", Shape{c.vocab_size, c.hidden_size}, vocab_part_);
  const RopeTables rope = ComputeRope(c);
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string prefix = StrCat("model.layers.", i, ".");
    Layer layer;
    layer.input_layernorm = loader.LoadNorm(prefix + "input_layernorm.weight", c.hidden_size);
    layer.post_attention_layernorm = loader.LoadNorm(prefix + "post_attention_layernorm.weight", c.hidden_size);
    layer.attention = std::make_unique<MlaAttention>(c, prefix + "self_attn.", loader, rope, rank);
    if (c.IsMoeLayer(i)) {
      layer.moe = std::make_unique<DeepseekMoe>(c, prefix + "mlp.", loader, rank);
    } else {
      layer.mlp = std::make_unique<SwiGluMlp>(
          prefix + "mlp.", c.hidden_size, c.intermediate_size,
          EvenPart(c.intermediate_size, rank.world_size(), rank.world_rank(), "intermediate_size"), loader);
    }
    layers_.push_back(std::move(layer));
  }
  norm_ = loader.LoadNorm("model.norm.weight", c.hidden_size);
  lm_head_ = loader.Load(c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                         Shape{c.vocab_size, c.hidden_size}, vocab_part_);
}

std::vector<KvLayerLayout> DeepseekV3Model::KvLayout() const {
  return std::vector<KvLayerLayout>(layers_.size(),
                                    KvLayerLayout{config_.kv_lora_rank + config_.qk_rope_head_dim, options_.kv_dtype});
}

void DeepseekV3Model::FeedForward(const Layer& layer, const StepContext& step, const Tensor& x, const Tensor& out) {
  kernels::Backend& b = backend_;
  const PcpPlan& plan = *step.plan;
  const std::int64_t rows = x.shape[0], hidden = config_.hidden_size;
  Buffer gathered, partial;
  Tensor in = x, result = out;
  if (plan.split()) {
    gathered = Buffer(DType::kF32, Shape{plan.cp_size * rows, hidden}, b.allocator());
    step.rank.groups->cp->AllGather(x, gathered);
    partial = Buffer(DType::kF32, gathered.tensor().shape, b.allocator());
    in = gathered;
    result = partial;
  }
  if (layer.moe) {
    layer.moe->Forward(b, in, result);
  } else {
    layer.mlp->Forward(b, in, result);
  }
  // Each rank computed its slice of the units for every row: sum the world's slices.
  if (step.rank.world_size() > 1) step.rank.groups->world->AllReduceSum(result);
  if (plan.split()) {
    std::vector<std::int32_t> own(rows);
    for (std::int64_t i = 0; i < rows; ++i) own[i] = static_cast<std::int32_t>(plan.cp_rank * rows + i);
    b.GatherRows(result, own, out);
  }
}

Buffer DeepseekV3Model::SelectLogitRows(const StepContext& step, const Tensor& h) {
  kernels::Backend& b = backend_;
  const PcpPlan& plan = *step.plan;
  const std::int64_t m = static_cast<std::int64_t>(step.logits_indices.size()), hidden = config_.hidden_size;
  Buffer selected(DType::kF32, Shape{m, hidden}, b.allocator());
  if (!plan.split()) {
    b.GatherRows(h, step.logits_indices, selected);
    return selected;
  }
  Buffer all(DType::kF32, Shape{plan.cp_size * plan.rows, hidden}, b.allocator());
  step.rank.groups->cp->AllGather(h, all);
  std::vector<std::int32_t> rows;
  for (std::int32_t i : step.logits_indices) rows.push_back(plan.gathered_row[i]);
  b.GatherRows(all, rows, selected);
  return selected;
}

StepLogits DeepseekV3Model::LmHead(const StepContext& step, const Tensor& rows) {
  kernels::Backend& b = backend_;
  const std::int64_t m = rows.shape[0], part = vocab_part_.size(config_.vocab_size);
  const int ranks = step.rank.attn_tp_size();
  kernels::Backend* owner = b.device().type == DeviceType::kCpu ? nullptr : &b;
  const Shape full{m, config_.vocab_size};
  // The logits go to step.logits_out when the step names one (a captured step's fixed output).
  Buffer logits;
  Tensor out = step.logits_out;
  if (out.data == nullptr) {
    logits = Buffer(DType::kF32, full, b.allocator());
    out = logits.tensor();
  }
  FISSION_CHECK(out.shape == full, "logits output ", out.shape.ToString(), ", expected ", full.ToString());
  if (ranks == 1) {
    b.Linear(rows, lm_head_, out);
  } else {
    Buffer local(DType::kF32, Shape{m, part}, b.allocator());
    b.Linear(rows, lm_head_, local);
    Buffer gathered(DType::kF32, Shape{ranks, m, part}, b.allocator());
    step.rank.groups->attn_tp->AllGather(local, gathered);
    // [rank, row, part] -> [row, rank * part]: row-gather the [rank * m, part] view. The order
    // depends on shapes alone, so a captured step keeps it in its input block.
    std::vector<std::int32_t> own_order;
    std::span<std::int32_t> order = step.shape_metadata;
    if (order.empty()) {
      own_order.resize(ranks * m);
      order = own_order;
    }
    FISSION_CHECK(static_cast<std::int64_t>(order.size()) >= ranks * m, "no room for the lm_head row order");
    order = order.first(ranks * m);
    for (std::int64_t i = 0; i < m; ++i)
      for (int r = 0; r < ranks; ++r) order[i * ranks + r] = static_cast<std::int32_t>(r * m + i);
    b.GatherRows(gathered.tensor().View(Shape{ranks * m, part}), order, out.View(Shape{m * ranks, part}));
  }
  if (logits.empty()) return StepLogits(out, owner);
  return StepLogits(std::move(logits), owner);
}

Buffer DeepseekV3Model::Forward(const ForwardBatch& batch, KvCache& cache) {
  return HostLogits(ForwardKeepLogits(batch, cache));
}

StepLogits DeepseekV3Model::ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) {
  FISSION_CHECK(batch.positions.size() == batch.token_ids.size() && batch.kv_slots.size() == batch.token_ids.size());
  for (std::int32_t id : batch.token_ids)
    FISSION_CHECK(id >= 0 && id < config_.vocab_size, "token id ", id, " outside vocabulary ", config_.vocab_size);
  if (DecodeGraphs* graphs = GraphsFor(cache); graphs != nullptr && graphs->Takes(batch)) {
    if (std::optional<StepLogits> logits = graphs->Run(batch, CapturedStep(cache))) return std::move(*logits);
  }
  const PcpPlan plan = MakePlan(batch);
  return RunStep(MakeStep(plan, batch, cache), cache);
}

DecodeGraphs::StepFn DeepseekV3Model::CapturedStep(KvCache& cache) {
  return [this, &cache](const ForwardBatch& padded, const GraphStepViews& views) {
    const PcpPlan plan = MakePlan(padded);
    StepContext step = MakeStep(plan, padded, cache);
    step.token_ids = views.token_ids;
    step.positions = views.positions;
    step.seqs = views.seqs;
    step.kv_slots = views.kv_slots;
    step.logits_indices = views.logits_indices;
    step.shape_metadata = views.shape_metadata;
    step.logits_out = views.logits_out;
    RunStep(step, cache);
  };
}

void DeepseekV3Model::CaptureDecodeGraphs(KvCache& cache) {
  DecodeGraphs* graphs = GraphsFor(cache);
  if (graphs == nullptr) return;
  const auto start = std::chrono::steady_clock::now();
  const int captured = graphs->CaptureAll(CapturedStep(cache));
  if (options_.rank.world_rank() == 0)
    Log(LogLevel::kInfo, "CUDA graphs: captured ", captured, " decode batch sizes in ",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s");
}

PcpPlan DeepseekV3Model::MakePlan(const ForwardBatch& batch) const {
  const RankInfo& rank = options_.rank;
  return PlanContextParallelStep(batch, rank.cp_size(), rank.cp_rank(), options_.pcp_min_tokens);
}

StepContext DeepseekV3Model::MakeStep(const PcpPlan& plan, const ForwardBatch& batch, const KvCache& cache) {
  StepContext step;
  step.backend = &backend_;
  step.rank = options_.rank;
  step.plan = &plan;
  step.token_ids = plan.token_ids;
  step.positions = plan.positions;
  step.seqs = plan.seqs;
  step.kv_slots = batch.kv_slots;
  step.logits_indices = batch.logits_indices;
  step.page_size = cache.page_size();
  step.mla_form = options_.mla_form;
  return step;
}

DecodeGraphs* DeepseekV3Model::GraphsFor(const KvCache& cache) {
  if (graph_sizes_.empty()) return nullptr;
  if (graphs_ == nullptr || !graphs_->For(cache)) {
    graphs_.reset();  // its graphs hold the old cache's addresses
    graphs_ = DecodeGraphs::Create(backend_, graph_sizes_, cache, config_.max_position_embeddings, config_.vocab_size);
    if (graphs_ == nullptr) graph_sizes_.clear();  // the backend does not capture (the CPU)
  }
  return graphs_.get();
}

StepLogits DeepseekV3Model::RunStep(const StepContext& step, KvCache& cache) {
  kernels::Backend& b = backend_;
  Allocator* alloc = b.allocator();
  const RankInfo& rank = options_.rank;
  const std::int64_t n = step.plan->rows, hidden = config_.hidden_size;
  Buffer h(DType::kF32, Shape{n, hidden}, alloc), x(DType::kF32, Shape{n, hidden}, alloc),
      y(DType::kF32, Shape{n, hidden}, alloc);
  b.Embedding(embed_tokens_, step.token_ids, vocab_part_.begin, h);
  if (rank.attn_tp_size() > 1) rank.groups->attn_tp->AllReduceSum(h);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    const Layer& layer = layers_[i];
    b.RmsNorm(h, layer.input_layernorm, eps, x);
    layer.attention->Forward(step, x, cache.layer(static_cast<int>(i)), y);
    b.Add(h, y, h);
    b.RmsNorm(h, layer.post_attention_layernorm, eps, x);
    FeedForward(layer, step, x, y);
    b.Add(h, y, h);
  }
  // Only the rows that need logits go through the final norm and lm_head.
  Buffer selected = SelectLogitRows(step, h);
  b.RmsNorm(selected, norm_, eps, selected);
  return LmHead(step, selected);
}

}  // namespace fission::model
