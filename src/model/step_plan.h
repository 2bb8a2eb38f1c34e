// The step plan the leader sends to the other nodes before every step (--nnodes > 1): the
// ForwardBatch and the geometry of the KV cache it addresses, in a compact little-endian binary
// form with a magic and a version. The decoder checks every count against the bytes left and every
// index against what it indexes (tokens, slots, pages), and rejects anything else with an Error,
// so a malformed plan can never make a follower read or write out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/forward_batch.h"

namespace fission::model {

inline constexpr std::uint16_t kStepPlanVersion = 1;

struct StepPlan {
  // Which of the leader's KV caches the step uses (a follower keeps one set of caches per id).
  std::uint32_t cache_id = 0;
  // The cache's geometry: followers build theirs the same, so every node has the same pages.
  std::int64_t num_pages = 0;
  std::int64_t page_size = 0;
  ForwardBatch batch;
};

std::string EncodeStepPlan(const StepPlan& plan);
// An Error ("step plan: ...") names the first thing that is wrong.
StepPlan DecodeStepPlan(std::string_view bytes);

}  // namespace fission::model
