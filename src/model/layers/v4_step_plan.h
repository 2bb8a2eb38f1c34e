// What DeepSeek-V4's layers share within one step, derived on the host from the step's sequences
// and written into the step-input block (a FamilyInputs), so its operations read it from the
// block's device copy and a decode step is captured and replayed like any other family's:
// - the ring slot of every token in each per-request ring the layers keep (the sliding window,
//   each compressor's carry-over state);
// - per compression ratio, the windows the step closes, with their entries' rope positions and
//   cache slots. Each sequence gets ceil(new tokens / ratio) places, the ones no window closes
//   marked -1, so the list's length follows from the step's shape: a decode step of n sequences
//   has n places whatever its positions;
// - the query rows of this rank's attention, and the token ids its MoE rows route by.
// The ring slots and windows are over every token of the step (StepView::token_seqs): under
// prefill context parallelism every rank writes the full ring, state and entries.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "kernels/v4_ops.h"
#include "model/step_inputs.h"

namespace fission::model {

struct V4Windows {
  std::span<const kernels::ClosedWindow> windows;
  std::span<const std::int32_t> positions;  // each entry's rope position: window · ratio (0 for a place)
  std::span<const std::int64_t> slots;      // each entry's slot in its paged class (-1 for a place)
};

struct V4StepPlan {
  // kernels::RingSlots of every token by ring length (the sliding window's, each compressor's
  // state_positions).
  std::map<std::int64_t, std::span<const std::int64_t>> ring_slots;
  // The token id of each row the MoE sees: this rank's rows, or under a split the CP group's
  // gathered rows (rank-major, padding rows token 0), for the hash-routed layers.
  std::span<const std::int32_t> moe_token_ids;
  std::map<std::int64_t, V4Windows> closed;  // by ratio
  kernels::V4Queries queries;                // this rank's query rows

  std::span<const std::int64_t> ring(std::int64_t keep) const { return ring_slots.at(keep); }
};

class V4StepPlanner final : public FamilyInputs {
 public:
  // The plan of a model with a sliding window of `window` positions, the given compression ratios
  // and compressor ring lengths (duplicates allowed), split over `cp_size` ranks.
  V4StepPlanner(std::int64_t window, const std::vector<std::int64_t>& ratios, const std::vector<std::int64_t>& keeps,
                int cp_size);
  std::size_t Bytes(std::int64_t rows, std::int64_t tokens, std::int64_t sequences) const override;
  void Write(const StepView& view, std::span<std::byte> region) const override;
  // The plan Write wrote for `view` (its StepView::family).
  V4StepPlan Read(const StepView& view) const;

 private:
  struct Layout {
    std::map<std::int64_t, std::size_t> rings;  // by ring length: [tokens] i64
    std::size_t moe_ids = 0;                    // [rows · cp] i32
    struct Windows {
      std::size_t windows = 0, positions = 0, slots = 0;  // [places] each
      std::int64_t capacity = 0;
    };
    std::map<std::int64_t, Windows> closed;  // by ratio
    std::size_t queries = 0;                 // [rows] V4QueryRow
    std::size_t bytes = 0;
  };
  Layout MakeLayout(std::int64_t rows, std::int64_t tokens, std::int64_t sequences) const;

  std::int64_t window_;
  std::set<std::int64_t> ratios_, keeps_;
  int cp_size_;
};

}  // namespace fission::model
