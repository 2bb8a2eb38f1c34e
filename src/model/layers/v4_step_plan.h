// What DeepSeek-V4's layers share within one step, derived once on the host from the step's
// sequences: where each new token's key goes in its sequence's sliding-window ring, and, per
// compression ratio, the windows the step closes and the cache slots of their entries. Both are
// over every token of the step (StepView::token_seqs): under prefill context parallelism every
// rank writes the full ring and the full entries.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "kernels/v4_ops.h"
#include "model/step_inputs.h"

namespace fission::model {

struct V4Windows {
  std::vector<kernels::ClosedWindow> windows;  // `seq` indexes StepView::token_seqs
  std::vector<std::int32_t> positions;  // each entry's rope position: window · ratio
  std::vector<std::int64_t> slots;      // each entry's slot in a paged class of `ratio` positions per entry
};

struct V4StepPlan {
  // The step's plan for a sliding window of `window` positions and the given compression ratios.
  V4StepPlan(const StepView& in, std::int64_t window, const std::vector<std::int64_t>& ratios);

  // [tokens]: the ring slot of each token's key (state slot · window + position % window), or -1
  // for a position that falls out of the window before the step ends.
  std::vector<std::int64_t> window_slots;
  // The token id of each row the MoE sees: this rank's rows, or under a split the CP group's
  // gathered rows (rank-major, padding rows token 0), for the hash-routed layers.
  std::vector<std::int32_t> moe_token_ids;
  std::map<std::int64_t, V4Windows> closed;  // by ratio
};

}  // namespace fission::model
