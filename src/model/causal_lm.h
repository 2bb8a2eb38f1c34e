// The interface every architecture implements, and what the engine's model runner calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/backend.h"
#include "model/draft_batch.h"
#include "model/forward_batch.h"
#include "model/memory_spec.h"
#include "tensor/tensor.h"

namespace fission::model {

// A step's fp32 logits [rows, vocab] and where they are.
struct StepLogits {
  StepLogits() = default;
  explicit StepLogits(Buffer owned, kernels::Backend* on = nullptr)
      : logits(owned.tensor()), backend(on), storage(std::move(owned)) {}
  // Logits the model keeps (a captured graph's output): valid until the model's next step.
  StepLogits(const Tensor& kept, kernels::Backend* on) : logits(kept), backend(on) {}

  Tensor logits;
  kernels::Backend* backend = nullptr;  // the backend whose device memory holds them; null: host memory
  Buffer storage;                       // owns `logits`, unless the model keeps them
};

// The logits in host memory (copied there from the device when they are not).
Buffer HostLogits(StepLogits logits);

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual std::string architecture() const = 0;
  virtual std::int64_t vocab_size() const = 0;
  virtual std::int64_t max_position_embeddings() const = 0;
  // What the model keeps per sequence between steps (its cache classes), per rank.
  virtual MemorySpec Memory() const = 0;
  // Makes (again) the storage of every rank for `plan`; the engine then hands out its pages and
  // state slots. Earlier contents and captured graphs are dropped.
  virtual void AllocateMemory(const MemoryPlan& plan) = 0;
  // Runs one step: writes the new tokens' entries into the model's memory and returns fp32 logits
  // [batch.logits_indices.size(), vocab_size], in host memory or left in the memory of the
  // device the model runs on (the engine then samples there). AllocateMemory must have run.
  virtual StepLogits Forward(const ForwardBatch& batch) = 0;
  // Data-parallel attention (--enable-dp-attention --dp-size): the attention groups the model
  // runs, each with its own batch and its own memory (every group gets the same MemoryPlan; page
  // and state-slot ids are the group's own). 1 otherwise.
  virtual int dp_size() const { return 1; }
  // One step of every group: `batches[g]` is group g's (empty: the group has no work and runs an
  // empty step, so that the groups still meet in every collective); returns each group's logits
  // (none for an empty group).
  virtual std::vector<StepLogits> ForwardGroups(const std::vector<ForwardBatch>& batches) {
    FISSION_CHECK(batches.size() == 1, architecture(), " runs one attention group, not ", batches.size());
    std::vector<StepLogits> logits;
    logits.push_back(Forward(batches[0]));
    return logits;
  }
  // The (token, routed expert) pairs each EP rank's experts computed since load, summed over the
  // MoE layers (one entry with tensor-parallel experts; empty for a model without MoE layers or
  // before its first step).
  virtual std::vector<std::int64_t> ExpertLoad() const { return {}; }
  // The memory left on the model's device after its weights (the smallest free and total over
  // its ranks); nullopt when the model runs in host memory.
  virtual std::optional<kernels::DeviceMemory> device_memory() { return std::nullopt; }
  // Captures the decode graphs of every configured batch size for the allocated memory now, as
  // SGLang does at start-up, so that no request waits for a capture; a model without graphs does
  // nothing. `draft_steps` > 0 (speculative decoding with that many drafts a sequence): also the
  // verify runs' graphs (draft_steps + 1 tokens a sequence), the padded draft extends' (when the
  // model takes them: padded_extend_rows) and the draft layer's chained steps'. It also tells the
  // model S = draft_steps, so a model without graphs is called too.
  virtual void CaptureDecodeGraphs(std::int32_t draft_steps) { (void)draft_steps; }
  // Drops captured decode graphs (they reference the communicators, which a parallel model
  // destroys before its ranks' models).
  virtual void ReleaseGraphs() {}

  // Speculative decoding with the model's own draft layers (model/draft_batch.h). A model that
  // loaded them keeps the hidden states of its last target step's rows (the rows fed to the lm_head)
  // and those of its last draft step, and its Memory() includes the draft layers' cache classes.
  virtual bool has_draft() const { return false; }
  // T > 0: the model takes the draft extend after a verify run (or a one-token decode) padded to T
  // rows a sequence (model/draft_batch.h, "Padded extends"), T = S + 1 of CaptureDecodeGraphs, and
  // the engine pads it so, graphs or not (a padded extend gives the same drafts eagerly and as a
  // replay). 0: extends of the committed rows only.
  virtual std::int32_t padded_extend_rows() const { return 0; }
  // Runs the draft layer over `batch` and returns its logits [batch.logits_indices.size(), vocab],
  // like Forward. The source step must be the model's latest step of that kind.
  virtual StepLogits ForwardDraft(const DraftBatch& batch) {
    (void)batch;
    Fail(architecture(), ": this model has no draft layer (speculative decoding needs one)");
  }
};

// One step's logits in host memory (tests and tools).
inline Buffer ForwardToHost(CausalLM& model, const ForwardBatch& batch) { return HostLogits(model.Forward(batch)); }

}  // namespace fission::model
