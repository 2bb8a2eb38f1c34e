#include "model/decoder.h"

#include <chrono>

#include "base/log.h"

namespace fission::model {

DecoderModel::DecoderModel(io::ModelConfig config, kernels::Backend& backend, const ShardOptions& options)
    : config_(std::move(config)), backend_(backend), options_(options) {
  graph_sizes_ = CudaGraphSizes(options.cuda_graphs);
  // Data-parallel attention and expert parallelism run eagerly: their collectives' sizes follow
  // every group's batch (DP) and the routing (EP), which a captured graph cannot.
  if (options.rank.dp_size() > 1 || options.rank.ep_size() > 1) graph_sizes_.clear();
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
  if (draft_ != nullptr) draft_class_ = memory_->spec().index_of(draft_->Memory().front().name);
  target_hidden_ = Buffer();
  draft_hidden_ = Buffer();
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
  if (DecodeGraphs* graphs = Graphs(); graphs != nullptr && batch.dp_groups.empty() && graphs->Takes(batch)) {
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
  // With a draft layer every step runs eagerly: draft steps read the hidden states an eager step
  // keeps (capturing verify and draft steps has not landed).
  if (graph_sizes_.empty() || memory_ == nullptr || draft_ != nullptr) return nullptr;
  if (graphs_ == nullptr || !graphs_->For(*memory_)) {
    graphs_.reset();
    graphs_ = DecodeGraphs::Create(backend_, graph_sizes_, *memory_, options_.rank.attn_tp_size(),
                                   config_.max_position_embeddings, config_.vocab_size);
    if (graphs_ == nullptr) graph_sizes_.clear();  // the backend does not capture (the CPU)
  }
  return graphs_.get();
}

StepContext DecoderModel::MakeContext(const StepView& view, const TokenLayout& layout, const Tensor& logits_out) const {
  StepContext step;
  step.backend = &backend_;
  step.in = &view;
  step.layout = &layout;
  step.memory = memory_.get();
  step.logits_out = logits_out;
  step.mla_form = options_.mla_form;
  return step;
}

StepLogits DecoderModel::RunStep(const StepView& view, const Tensor& logits_out) {
  const TokenLayout layout(backend_, options_.rank, view, &expert_load_);
  const StepContext step = MakeContext(view, layout, logits_out);
  Buffer h = Hidden(step);
  if (draft_ != nullptr && logits_out.data == nullptr) {
    // Keep every row, normed, for the draft's next extend; a row's norm is the same bits whether
    // it is taken before or after selecting the logits rows.
    target_hidden_ = layout.AllRows(std::move(h));
    backend_.RmsNorm(target_hidden_, final_norm_, final_norm_eps_, target_hidden_);
    Buffer selected(DType::kF32, Shape{static_cast<std::int64_t>(view.logits_indices.size()), config_.hidden_size},
                    backend_.allocator());
    backend_.GatherRows(target_hidden_, view.logits_indices, selected);
    return LmHead(step, selected);
  }
  if (draft_ != nullptr) target_hidden_ = Buffer();  // a captured step keeps nothing
  // Only the rows that need logits go through the final norm and lm_head.
  Buffer selected = layout.LogitRows(h);
  backend_.RmsNorm(selected, final_norm_, final_norm_eps_, selected);
  return LmHead(step, selected);
}

MemorySpec DecoderModel::WithDraftMemory(MemorySpec family) const {
  if (draft_ != nullptr)
    for (CacheClass& c : draft_->Memory()) family.classes.push_back(std::move(c));
  return family;
}

StepLogits DecoderModel::ForwardDraft(const DraftBatch& draft) {
  if (draft_ == nullptr) return CausalLM::ForwardDraft(draft);  // an Error naming the model
  FISSION_CHECK(memory_ != nullptr, "ForwardDraft before AllocateMemory");
  const ForwardBatch& batch = draft.batch;
  const std::int32_t n = batch.num_tokens();
  FISSION_CHECK(batch.positions.size() == batch.token_ids.size() && batch.kv_slots.size() == batch.token_ids.size() &&
                draft.hidden_rows.size() == batch.token_ids.size());
  const Buffer& source = draft.source == DraftBatch::Source::kTarget ? target_hidden_ : draft_hidden_;
  const std::int64_t source_rows = source.empty() ? 0 : source.tensor().shape[0];
  for (std::int32_t i = 0; i < n; ++i) {
    FISSION_CHECK(batch.token_ids[i] >= 0 && batch.token_ids[i] < config_.vocab_size, "draft token id ",
                  batch.token_ids[i], " outside vocabulary ", config_.vocab_size);
    FISSION_CHECK(draft.hidden_rows[i] >= 0 && draft.hidden_rows[i] < source_rows, "draft row ", i,
                  " reads hidden row ", draft.hidden_rows[i], " of a step that kept ", source_rows);
  }
  const PcpPlan plan = PlanContextParallelStep(batch, 1, 0, options_.pcp_min_tokens);
  const StepView& view = inputs_->Write(batch, plan, memory_->plan().page_size);
  inputs_->Upload();
  const TokenLayout layout(backend_, options_.rank, view);
  const StepContext step = MakeContext(view, layout, Tensor{});
  const Shape rows{n, config_.hidden_size};
  Allocator* alloc = backend_.allocator();
  Buffer embedded(DType::kF32, rows, alloc), previous(DType::kF32, rows, alloc), out(DType::kF32, rows, alloc);
  Embed(step, embedded);
  backend_.GatherRows(source, draft.hidden_rows, previous);
  draft_->Forward(step, embedded, previous, draft_class_, out);
  draft_hidden_ = std::move(out);
  Buffer selected(DType::kF32, Shape{static_cast<std::int64_t>(view.logits_indices.size()), config_.hidden_size},
                  alloc);
  backend_.GatherRows(draft_hidden_, view.logits_indices, selected);
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
