#include "model/decoder.h"

#include <chrono>
#include <string>

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
  ReleaseGraphs();  // they hold the old storage's addresses
  memory_.reset();
  memory_ = std::make_unique<ModelMemory>(Memory(), plan, backend_.allocator());
  inputs_ = std::make_unique<StepInputs>(backend_, memory_->spec(), options_.rank.attn_tp_size(), 0,
                                         family_inputs_.get());
  if (draft_ != nullptr) draft_class_ = memory_->spec().index_of(draft_->Memory().front().name);
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
  if (DecodeGraphs* graphs = TargetGraphs(batch)) {
    if (std::optional<DecodeGraphs::Result> run = graphs->Run(batch, TargetStepFn())) {
      if (draft_ != nullptr) target_hidden_.View(run->hidden);
      return std::move(run->logits);
    }
  }
  const RankInfo& rank = options_.rank;
  const PcpPlan plan = PlanContextParallelStep(batch, rank.cp_size(), rank.cp_rank(), options_.pcp_min_tokens);
  const StepView& view = inputs_->Write(batch, plan, memory_->plan().page_size);
  inputs_->Upload();
  return RunStep(view, DecodeGraphs::Outputs{});
}

DecodeGraphs::StepFn DecoderModel::TargetStepFn() {
  return [this](const StepView& view, const DecodeGraphs::Outputs& out) { RunStep(view, out); };
}

DecodeGraphs::StepFn DecoderModel::DraftStepFn() {
  return [this](const StepView& view, const DecodeGraphs::Outputs& out) { DraftStep(view, out.input, out); };
}

void DecoderModel::CaptureDecodeGraphs(std::int32_t draft_steps) {
  verify_tokens_ = draft_ != nullptr && draft_steps > 0 ? draft_steps + 1 : 0;
  // The engine pads extends whether or not graphs are on, so its drafts do not depend on them.
  extend_rows_ = verify_tokens_ > 0 && draft_takes_padding_ ? verify_tokens_ : 0;
  DecodeGraphs* decode = GraphSet(&target_graphs_[1], 1, GraphKind::kTarget);
  if (decode == nullptr) return;
  const auto start = std::chrono::steady_clock::now();
  std::string captured = StrCat(decode->CaptureAll(TargetStepFn()), " decode");
  if (verify_tokens_ > 0) {
    // Verify runs of S + 1 tokens a sequence at the same batch sizes (as SGLang), the draft
    // extends after them padded to S + 1 rows a sequence (as SGLang's draft-extend graphs), and
    // the chained draft steps (S - 1 a decode step) when there are any.
    const int tokens = verify_tokens_;
    captured += StrCat(", ", GraphSet(&target_graphs_[tokens], tokens, GraphKind::kTarget)->CaptureAll(TargetStepFn()),
                       " verify (", tokens, " tokens a sequence)");
    if (extend_rows_ > 0)
      captured += StrCat(", ", GraphSet(&extend_graphs_, extend_rows_, GraphKind::kExtend)->CaptureAll(DraftStepFn()),
                         " draft extend (", extend_rows_, " rows a sequence)");
    if (draft_steps > 1)
      captured += StrCat(", ", GraphSet(&draft_graphs_, 1, GraphKind::kDraft)->CaptureAll(DraftStepFn()), " draft");
  }
  if (options_.rank.world_rank() == 0)
    Log(LogLevel::kInfo, "CUDA graphs: captured ", captured, " batch sizes in ",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s");
}

void DecoderModel::ReleaseGraphs() {
  target_graphs_.clear();
  draft_graphs_.reset();
  extend_graphs_.reset();
  // They may be views of the graphs' rows.
  target_hidden_.View(Tensor{});
  draft_hidden_.View(Tensor{});
}

DecodeGraphs* DecoderModel::GraphSet(std::unique_ptr<DecodeGraphs>* slot, int tokens_per_sequence, GraphKind kind) {
  if (graph_sizes_.empty() || memory_ == nullptr) return nullptr;
  if (*slot == nullptr || !(*slot)->For(*memory_)) {
    slot->reset();
    DecodeGraphs::StepShape shape;
    shape.tokens_per_sequence = tokens_per_sequence;
    shape.vocab_size = config_.vocab_size;
    shape.vocab_ranks = options_.rank.attn_tp_size();
    shape.max_positions = config_.max_position_embeddings;
    shape.family = family_inputs_.get();
    // With a draft layer every target step keeps its normed hidden rows, and a draft step reads
    // the rows the caller gathers into its input.
    if (draft_ != nullptr) shape.hidden_size = config_.hidden_size;
    shape.input_rows = kind != GraphKind::kTarget;
    shape.last_row_logits = kind == GraphKind::kExtend;
    shape.what = kind == GraphKind::kExtend ? "draft extend"
                 : kind == GraphKind::kDraft ? "draft"
                 : tokens_per_sequence > 1   ? "verify"
                                             : "decode";
    *slot = DecodeGraphs::Create(backend_, graph_sizes_, *memory_, shape);
    if (*slot == nullptr) graph_sizes_.clear();  // the backend does not capture (the CPU)
  }
  return slot->get();
}

DecodeGraphs* DecoderModel::TargetGraphs(const ForwardBatch& batch) {
  if (graph_sizes_.empty() || !batch.dp_groups.empty() || batch.sequences.empty()) return nullptr;
  const SequenceSlice& first = batch.sequences.front();
  // Several tokens a sequence are captured as the engine's verify runs only.
  if (first.query_len < 1 || (first.query_len > 1 && (first.query_len != verify_tokens_ || !first.verify)))
    return nullptr;
  DecodeGraphs* graphs = GraphSet(&target_graphs_[first.query_len], first.query_len, GraphKind::kTarget);
  return graphs != nullptr && graphs->Takes(batch) ? graphs : nullptr;
}

DecodeGraphs* DecoderModel::DraftGraphs(const DraftBatch& draft) {
  const ForwardBatch& batch = draft.batch;
  if (graph_sizes_.empty() || batch.sequences.empty()) return nullptr;
  const SequenceSlice& first = batch.sequences.front();
  DecodeGraphs* graphs = nullptr;
  if (first.query_len == 1) {
    graphs = GraphSet(&draft_graphs_, 1, GraphKind::kDraft);
  } else if (extend_rows_ > 0 && first.query_len == extend_rows_ && first.verify &&
             draft.source == DraftBatch::Source::kTarget) {
    graphs = GraphSet(&extend_graphs_, extend_rows_, GraphKind::kExtend);
  }
  return graphs != nullptr && graphs->Takes(batch) ? graphs : nullptr;
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

StepLogits DecoderModel::RunStep(const StepView& view, const DecodeGraphs::Outputs& out) {
  const TokenLayout layout(backend_, options_.rank, view, &expert_load_);
  const StepContext step = MakeContext(view, layout, out.logits);
  Buffer h = Hidden(step);
  if (draft_ == nullptr) {
    // Only the rows that need logits go through the final norm and lm_head.
    Buffer selected = layout.LogitRows(h);
    backend_.RmsNorm(selected, final_norm_, final_norm_eps_, selected);
    return LmHead(step, selected);
  }
  // Keep every row, normed, for the draft's next extend (a captured step in its fixed rows); a
  // row's norm is the same bits whether it is taken before or after selecting the logits rows.
  Buffer all = layout.AllRows(std::move(h));
  const Tensor kept = out.hidden.data != nullptr ? out.hidden : all.tensor();
  backend_.RmsNorm(all, final_norm_, final_norm_eps_, kept);
  Buffer selected(DType::kF32, Shape{static_cast<std::int64_t>(view.logits_indices.size()), config_.hidden_size},
                  backend_.allocator());
  backend_.GatherRows(kept, view.logits_indices, selected);
  if (out.hidden.data == nullptr) target_hidden_.Own(std::move(all));
  return LmHead(step, selected);
}

MemorySpec DecoderModel::WithDraftMemory(MemorySpec family) const {
  if (draft_ != nullptr)
    for (CacheClass& c : draft_->Memory()) family.classes.push_back(std::move(c));
  return family;
}

void DecoderModel::CheckDraftBatch(const DraftBatch& draft, std::int64_t source_rows) const {
  const ForwardBatch& batch = draft.batch;
  FISSION_CHECK(batch.positions.size() == batch.token_ids.size() && batch.kv_slots.size() == batch.token_ids.size() &&
                draft.hidden_rows.size() == batch.token_ids.size());
  for (std::int32_t i = 0; i < batch.num_tokens(); ++i) {
    FISSION_CHECK(batch.token_ids[i] >= 0 && batch.token_ids[i] < config_.vocab_size, "draft token id ",
                  batch.token_ids[i], " outside vocabulary ", config_.vocab_size);
    FISSION_CHECK(draft.hidden_rows[i] >= 0 && draft.hidden_rows[i] < source_rows, "draft row ", i,
                  " reads hidden row ", draft.hidden_rows[i], " of a step that kept ", source_rows);
    FISSION_CHECK(batch.kv_slots[i] >= 0 || draft_takes_padding_, "draft row ", i,
                  " is a padding row (KV slot -1), which this draft layer does not take");
  }
}

StepLogits DecoderModel::ForwardDraft(const DraftBatch& draft) {
  if (draft_ == nullptr) return CausalLM::ForwardDraft(draft);  // an Error naming the model
  FISSION_CHECK(memory_ != nullptr, "ForwardDraft before AllocateMemory");
  const ForwardBatch& batch = draft.batch;
  const KeptRows& source = draft.source == DraftBatch::Source::kTarget ? target_hidden_ : draft_hidden_;
  CheckDraftBatch(draft, source.count());
  const Shape rows{batch.num_tokens(), config_.hidden_size};
  if (DecodeGraphs* graphs = DraftGraphs(draft)) {
    // The rows go into the graph's input before any capture, which may write the source (the
    // previous draft step's rows are this set's own output).
    const Tensor input = graphs->InputRows(batch.num_tokens());
    backend_.GatherRows(source.rows, draft.hidden_rows, input);
    if (std::optional<DecodeGraphs::Result> run = graphs->Run(batch, DraftStepFn())) {
      draft_hidden_.View(run->hidden);
      return std::move(run->logits);
    }
  }
  const PcpPlan plan = PlanContextParallelStep(batch, 1, 0, options_.pcp_min_tokens);
  const StepView& view = inputs_->Write(batch, plan, memory_->plan().page_size);
  inputs_->Upload();
  Buffer previous(DType::kF32, rows, backend_.allocator()), hidden(DType::kF32, rows, backend_.allocator());
  backend_.GatherRows(source.rows, draft.hidden_rows, previous);
  DecodeGraphs::Outputs out;
  out.hidden = hidden.tensor();
  StepLogits logits = DraftStep(view, previous, out);
  draft_hidden_.Own(std::move(hidden));
  return logits;
}

StepLogits DecoderModel::DraftStep(const StepView& view, const Tensor& previous, const DecodeGraphs::Outputs& out) {
  const TokenLayout layout(backend_, options_.rank, view);
  const StepContext step = MakeContext(view, layout, out.logits);
  Allocator* alloc = backend_.allocator();
  Buffer embedded(DType::kF32, Shape{view.rows, config_.hidden_size}, alloc);
  Embed(step, embedded);
  draft_->Forward(step, embedded, previous, draft_class_, out.hidden);
  Buffer selected(DType::kF32, Shape{static_cast<std::int64_t>(view.logits_indices.size()), config_.hidden_size},
                  alloc);
  backend_.GatherRows(out.hidden, view.logits_indices, selected);
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
