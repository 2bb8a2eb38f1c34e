// What every decoder-only family shares, so that a family file holds only its own math: the
// step's plumbing (token ids checked, the context-parallel split planned, the step-input block
// written and uploaded, decode, verify, padded draft extend and chained draft steps sent to CUDA
// graphs), the model's
// memory, the vocab-parallel
// embedding, and the final norm and lm_head over only the rows whose logits the step returns.
//
// A family derives from DecoderModel, loads its weights in its constructor (SetVocabulary for
// the embedding, final norm and lm_head), declares its memory (Memory) and computes its layers
// (Hidden).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "io/model_config.h"
#include "model/causal_lm.h"
#include "model/decode_graphs.h"
#include "model/draft_head.h"
#include "model/model_memory.h"
#include "model/step_context.h"
#include "model/step_inputs.h"
#include "model/token_layout.h"
#include "model/weights.h"

namespace fission::model {

// How one rank's shard of a model is loaded and run.
struct ShardOptions {
  RankInfo rank;
  MlaForm mla_form = MlaForm::kAuto;
  int pcp_min_tokens = kDefaultPcpMinTokens;
  // Split DSA's indexer queries over the attention-TP group (LoadOptions::indexer_query_split).
  bool indexer_query_split = false;
  // The KV cache's element type: fp32 (exact on the CPU) or bf16 (the CUDA backend's fast path).
  DType kv_dtype = DType::kF32;
  // How the MLA latent rows are stored: exactly (in kv_dtype) or FP8 (--kv-cache-dtype fp8_e4m3).
  kernels::LatentFormat latent_format = kernels::LatentFormat::kExact;
  // How DeepSeek Sparse Attention stores its indexer keys: exactly (in kv_dtype) or as e4m3 with a
  // per-token scale (kernels/dsa_ops.h).
  kernels::IndexKeyFormat index_keys = kernels::IndexKeyFormat::kExact;
  // Decode steps as CUDA graph replays (model/decode_graphs.h) on backends that capture them.
  CudaGraphOptions cuda_graphs;
  // Speculative decoding: load the family's draft (NextN) layer `draft_layer` of `draft_checkpoint`
  // (null: the target's own checkpoint, or dummy weights with the target's).
  bool load_draft = false;
  const io::Checkpoint* draft_checkpoint = nullptr;
  std::int64_t draft_layer = 0;
};

class DecoderModel : public CausalLM {
 public:
  std::int64_t vocab_size() const override { return config_.vocab_size; }
  std::int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
  void AllocateMemory(const MemoryPlan& plan) override;
  // On a device the logits stay in its memory.
  StepLogits Forward(const ForwardBatch& batch) override;
  void CaptureDecodeGraphs(std::int32_t draft_steps) override;
  void ReleaseGraphs() override;
  bool has_draft() const override { return draft_ != nullptr; }
  // S + 1 once CaptureDecodeGraphs(S) announced S > 0, when the draft layer takes padding rows.
  std::int32_t padded_extend_rows() const override { return extend_rows_; }
  std::vector<std::int64_t> ExpertLoad() const override { return expert_load_.per_ep_rank; }
  // Draft steps run unsplit on every rank (the CP split is for the target's prefill); one row per
  // sequence (the chained steps) and padded extends as graph replays.
  StepLogits ForwardDraft(const DraftBatch& batch) override;

  const io::ModelConfig& config() const { return config_; }
  // This rank's storage (tests read the cache); AllocateMemory must have run.
  const ModelMemory& memory() const;

 protected:
  DecoderModel(io::ModelConfig config, kernels::Backend& backend, const ShardOptions& options);

  // The family's layers: the hidden states [rows, hidden] of this rank's rows after the last
  // layer, before the final norm.
  virtual Buffer Hidden(const StepContext& step) = 0;
  // Loads the vocabulary's weights (the rank's slice of vocab_part()) by the family's names.
  void SetVocabulary(Buffer embed_tokens, Buffer final_norm, float final_norm_eps, Weight lm_head);
  // The same by DeepSeek checkpoints' names, in their order: the embedding first
  // (model.embed_tokens), then after the layers the final norm (model.norm) and lm_head (or the
  // tied embedding).
  Buffer LoadDeepseekEmbedding(WeightLoader& loader) const;
  void LoadDeepseekHead(WeightLoader& loader, Buffer embed_tokens);
  // The family's draft layer (loaded after the target's weights) and the memory with its cache
  // classes after the family's.
  void SetDraft(std::unique_ptr<DraftHead> draft) {
    draft_ = std::move(draft);
    draft_takes_padding_ = draft_ != nullptr && draft_->TakesPaddingRows();
  }
  MemorySpec WithDraftMemory(MemorySpec family) const;
  // h [rows, hidden] = the embedding of this rank's tokens (summed over the vocabulary ranks).
  void Embed(const StepContext& step, const Tensor& h) const;
  const ShardOptions& options() const { return options_; }
  kernels::Backend& backend() const { return backend_; }
  // What the family derives from every step into the step-input block (model/step_inputs.h);
  // set in the family's constructor.
  void SetFamilyInputs(std::unique_ptr<FamilyInputs> family) { family_inputs_ = std::move(family); }
  // This rank's rows of the vocabulary (embedding and lm_head are split over the attention-TP
  // group).
  Range vocab_part() const { return vocab_part_; }

 private:
  // Rows a draft step reads: an eager step's own buffer, or a graph's fixed output rows (valid
  // until that graph set runs again, which is after the draft step that reads them).
  struct KeptRows {
    Buffer owned;
    Tensor rows;
    void Own(Buffer b) {
      owned = std::move(b);
      rows = owned.tensor();
    }
    void View(const Tensor& t) {
      owned = Buffer();
      rows = t;
    }
    std::int64_t count() const { return rows.data == nullptr ? 0 : rows.shape[0]; }
  };

  // A target step of `view`: logits (and, with a draft layer, the normed hidden rows) into `out`'s
  // tensors when it names them (a captured step), else into new buffers.
  StepLogits RunStep(const StepView& view, const DecodeGraphs::Outputs& out);
  // A draft step of `view` over the hidden rows `previous`, writing out.hidden (and out.logits when
  // it names them).
  StepLogits DraftStep(const StepView& view, const Tensor& previous, const DecodeGraphs::Outputs& out);
  void CheckDraftBatch(const DraftBatch& draft, std::int64_t source_rows) const;
  StepLogits LmHead(const StepContext& step, const Tensor& rows);
  StepContext MakeContext(const StepView& view, const TokenLayout& layout, const Tensor& logits_out) const;
  // What a graph set runs: target steps, chained draft steps (one row a sequence, reading input
  // rows) or padded draft extends (T rows a sequence reading input rows, the last row's logits).
  enum class GraphKind : std::uint8_t { kTarget, kDraft, kExtend };
  // The graph set in `slot` for the allocated memory (made anew after AllocateMemory), null when
  // graphs are off, of `kind` at `tokens_per_sequence` tokens a sequence.
  DecodeGraphs* GraphSet(std::unique_ptr<DecodeGraphs>* slot, int tokens_per_sequence, GraphKind kind);
  // The set that runs `batch` as a replay, or null (the step runs eagerly).
  DecodeGraphs* TargetGraphs(const ForwardBatch& batch);
  DecodeGraphs* DraftGraphs(const DraftBatch& draft);
  DecodeGraphs::StepFn TargetStepFn();
  DecodeGraphs::StepFn DraftStepFn();

  io::ModelConfig config_;
  kernels::Backend& backend_;
  ShardOptions options_;
  Range vocab_part_;
  Buffer embed_tokens_, final_norm_;
  float final_norm_eps_ = 1e-6f;
  Weight lm_head_;
  std::unique_ptr<ModelMemory> memory_;
  std::unique_ptr<FamilyInputs> family_inputs_;  // before the blocks that point to it
  std::unique_ptr<StepInputs> inputs_;  // eager steps' block
  std::vector<int> graph_sizes_;        // empty: every step runs eagerly
  // Target steps' graphs by tokens per sequence (1: decode, S + 1: verify runs), and the draft
  // layer's: chained steps (one row per sequence) and padded extends (extend_rows_ a sequence).
  std::map<int, std::unique_ptr<DecodeGraphs>> target_graphs_;
  std::unique_ptr<DecodeGraphs> draft_graphs_, extend_graphs_;
  // S + 1 of the engine's speculative decoding (CaptureDecodeGraphs): verify runs of other lengths
  // (sequences near max_new_tokens draft fewer) run eagerly. 0: no verify graphs.
  int verify_tokens_ = 0;
  // S + 1 when the draft layer takes padded extends (model/draft_batch.h), else 0.
  std::int32_t extend_rows_ = 0;
  std::unique_ptr<DraftHead> draft_;
  int draft_class_ = -1;  // the draft's first cache class in the allocated memory
  bool draft_takes_padding_ = false;  // DraftHead::TakesPaddingRows
  // With a draft layer: the normed hidden states [tokens, hidden] of every row of the last target
  // step and of the last draft step, in token order (what the next draft step reads).
  KeptRows target_hidden_, draft_hidden_;
  ExpertLoadCount expert_load_;  // counted by the token layout's MoE transitions
};

}  // namespace fission::model
