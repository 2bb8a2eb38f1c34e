// What every layer's forward needs besides its own weights: the backend, the ranks it works with,
// and this step's context-parallel plan (which rows this rank computes, and their attention
// metadata).
#pragma once

#include <cstdint>
#include <span>

#include "comm/communicator.h"
#include "kernels/backend.h"
#include "model/pcp_plan.h"

namespace fission::model {

enum class MlaForm { kAuto, kExpanded, kAbsorbed };

// This rank's place in the parallel layout; a single rank has sizes of 1 and no communicators.
struct RankInfo {
  const comm::ProcessGroups* groups = nullptr;
  int world_rank() const { return groups ? groups->world_rank : 0; }
  int world_size() const { return groups ? groups->world_size : 1; }
  int attn_tp_rank() const { return groups ? groups->attn_tp_rank : 0; }
  int attn_tp_size() const { return groups ? groups->attn_tp_size : 1; }
  int cp_rank() const { return groups ? groups->cp_rank : 0; }
  int cp_size() const { return groups ? groups->cp_size : 1; }
};

// The step's host metadata is read through these spans, not from the plan: a captured step
// (model/decode_graphs.h) points them into its graph's input block.
struct StepContext {
  kernels::Backend* backend = nullptr;
  RankInfo rank;
  const PcpPlan* plan = nullptr;
  std::span<const std::int32_t> token_ids;  // this rank's rows (plan->token_ids)
  std::span<const std::int32_t> positions;  // plan->positions
  std::span<const kernels::SeqAttention> seqs;  // plan->seqs
  std::span<const std::int64_t> kv_slots;  // every token of the step (all ranks write full KV)
  std::span<const std::int32_t> logits_indices;  // the batch's rows whose logits are returned
  // Room for host metadata derived from shapes alone (empty: the step keeps its own).
  std::span<std::int32_t> shape_metadata;
  Tensor logits_out;  // where the logits go (data null: a new buffer)
  std::int64_t page_size = 0;
  MlaForm mla_form = MlaForm::kAuto;
};

}  // namespace fission::model
