// The follower step the leader sends to the other nodes before every step (--nnodes > 1): the
// ForwardBatch and the geometry of the model memory it addresses, in a compact little-endian binary
// form with a magic and a version. The decoder checks every count against the bytes left and every
// index against what it indexes (tokens, slots, pages), and rejects anything else with an Error,
// so a malformed plan can never make a follower read or write out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/forward_batch.h"
#include "model/memory_spec.h"

namespace fission::model {

inline constexpr std::uint16_t kFollowerStepVersion = 2;

struct FollowerStep {
  // The memory's geometry: followers allocate theirs the same (again when it changes), so every
  // node has the same pages and state slots.
  MemoryPlan memory;
  ForwardBatch batch;
};

std::string EncodeFollowerStep(const FollowerStep& plan);
// An Error ("follower step: ...") names the first thing that is wrong.
FollowerStep DecodeFollowerStep(std::string_view bytes);

}  // namespace fission::model
