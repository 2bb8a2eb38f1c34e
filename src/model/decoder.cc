#include "model/decoder.h"

#include <chrono>

#include "base/log.h"

namespace fission::model {

DecoderModel::DecoderModel(io::ModelConfig config, kernels::Backend& backend, const ShardOptions& options)
    : config_(std::move(config)), backend_(backend), options_(options) {
  graph_sizes_ = CudaGraphSizes(options.cuda_graphs);
  vocab_part_ = EvenPart(config_.vocab_size, options.rank.attn_tp_size(), options.rank.attn_tp_rank(), "vocab_size");
}

void DecoderModel::SetVocabulary(Buffer embed_tokens, Buffer final_norm, float final_norm_eps, Weight lm_head) {
  embed_tokens_ = std::move(embed_tokens);
  final_norm_ = std::move(final_norm);
  final_norm_eps_ = final_norm_eps;
  lm_head_ = std::move(lm_head);
}

Buffer DecoderModel::LoadDeepseekEmbedding(WeightLoader& loader) const {
  return loader.Load("model.embed_tokens.weight", Shape{config_.vocab_size, config_.hidden_size}, vocab_part_);
}

void DecoderModel::LoadDeepseekHead(WeightLoader& loader, Buffer embed_tokens) {
  Buffer norm = loader.LoadNorm("model.norm.weight", config_.hidden_size);
  Buffer lm_head = loader.Load(config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                               Shape{config_.vocab_size, config_.hidden_size}, vocab_part_);
  SetVocabulary(std::move(embed_tokens), std::move(norm), static_cast<float>(config_.rms_norm_eps),
                Weight::Plain(std::move(lm_head)));
}

void DecoderModel::AllocateMemory(const MemoryPlan& plan) {
  graphs_.reset();  // they hold the old storage's addresses
  memory_.reset();
  memory_ = std::make_unique<ModelMemory>(Memory(), plan, backend_.allocator());
  inputs_ = std::make_unique<StepInputs>(backend_, memory_->spec(), options_.rank.attn_tp_size());
  if (options_.indexer_query_split) inputs_->SplitIndexerQueries(options_.rank.attn_tp_size(), options_.rank.attn_tp_rank());
}

const ModelMemory& DecoderModel::memory() const {
  FISSION_CHECK(memory_ != nullptr, "the model's memory is not allocated (AllocateMemory)");
  return *memory_;
}

void DecoderModel::Embed(const StepContext& step, const Tensor& h) const {
  step.backend->Embedding(embed_tokens_, step.in->token_ids, vocab_part_.begin, h);
  step.layout->ReduceEmbedding(h);
}

StepLogits DecoderModel::Forward(const ForwardBatch& batch) {
  FISSION_CHECK(memory_ != nullptr, "Forward before AllocateMemory");
  FISSION_CHECK(batch.positions.size() == batch.token_ids.size() && batch.kv_slots.size() == batch.token_ids.size());
  for (std::int32_t id : batch.token_ids)
    FISSION_CHECK(id >= 0 && id < config_.vocab_size, "token id ", id, " outside vocabulary ", config_.vocab_size);
  if (DecodeGraphs* graphs = Graphs(); graphs != nullptr && graphs->Takes(batch)) {
    if (std::optional<StepLogits> logits = graphs->Run(batch, CapturedStep())) return std::move(*logits);
  }
  const RankInfo& rank = options_.rank;
  const PcpPlan plan = PlanContextParallelStep(batch, rank.cp_size(), rank.cp_rank(), options_.pcp_min_tokens);
  const StepView& view = inputs_->Write(batch, plan, memory_->plan().page_size);
  inputs_->Upload();
  return RunStep(view, Tensor{});
}

DecodeGraphs::StepFn DecoderModel::CapturedStep() {
  return [this](const StepView& view, const Tensor& logits_out) { RunStep(view, logits_out); };
}

void DecoderModel::CaptureDecodeGraphs() {
  DecodeGraphs* graphs = Graphs();
  if (graphs == nullptr) return;
  const auto start = std::chrono::steady_clock::now();
  const int captured = graphs->CaptureAll(CapturedStep());
  if (options_.rank.world_rank() == 0)
    Log(LogLevel::kInfo, "CUDA graphs: captured ", captured, " decode batch sizes in ",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s");
}

DecodeGraphs* DecoderModel::Graphs() {
  if (graph_sizes_.empty() || memory_ == nullptr) return nullptr;
  if (graphs_ == nullptr || !graphs_->For(*memory_)) {
    graphs_.reset();
    graphs_ = DecodeGraphs::Create(backend_, graph_sizes_, *memory_, options_.rank.attn_tp_size(),
                                   config_.max_position_embeddings, config_.vocab_size);
    if (graphs_ == nullptr) graph_sizes_.clear();  // the backend does not capture (the CPU)
  }
  return graphs_.get();
}

StepLogits DecoderModel::RunStep(const StepView& view, const Tensor& logits_out) {
  const TokenLayout layout(backend_, options_.rank, view);
  StepContext step;
  step.backend = &backend_;
  step.in = &view;
  step.layout = &layout;
  step.memory = memory_.get();
  step.logits_out = logits_out;
  step.mla_form = options_.mla_form;
  const Buffer h = Hidden(step);
  // Only the rows that need logits go through the final norm and lm_head.
  Buffer selected = layout.LogitRows(h);
  backend_.RmsNorm(selected, final_norm_, final_norm_eps_, selected);
  return LmHead(step, selected);
}

StepLogits DecoderModel::LmHead(const StepContext& step, const Tensor& rows) {
  kernels::Backend& b = backend_;
  kernels::Backend* owner = b.device().type == DeviceType::kCpu ? nullptr : &b;
  const Shape full{rows.shape[0], config_.vocab_size};
  // The logits go to step.logits_out when the step names one (a captured step's fixed output).
  Buffer logits;
  Tensor out = step.logits_out;
  if (out.data == nullptr) {
    logits = Buffer(DType::kF32, full, b.allocator());
    out = logits.tensor();
  }
  FISSION_CHECK(out.shape == full, "logits output ", out.shape.ToString(), ", expected ", full.ToString());
  Buffer scratch;
  const Tensor local = step.layout->VocabSlice(out, &scratch);
  b.Linear(rows, lm_head_, local);
  step.layout->GatherVocab(local, out);
  if (logits.empty()) return StepLogits(out, owner);
  return StepLogits(std::move(logits), owner);
}

}  // namespace fission::model
