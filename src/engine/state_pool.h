// The state slots of a model with per-request memory (model/memory_spec.h): a running sequence
// holds one slot, reserved when it is admitted and freed when it finishes or is preempted.
#pragma once

#include <cstdint>
#include <vector>

namespace fission::engine {

class StatePool {
 public:
  explicit StatePool(std::int32_t num_slots);

  std::int32_t num_slots() const { return static_cast<std::int32_t>(used_.size()); }
  std::int32_t num_free() const { return static_cast<std::int32_t>(free_.size()); }
  // A free slot, or -1 when none is left.
  std::int32_t Reserve();
  void Free(std::int32_t slot);
  bool used(std::int32_t slot) const { return used_[slot]; }

 private:
  std::vector<bool> used_;
  std::vector<std::int32_t> free_;  // a stack: the most recently freed slot is reserved first
};

}  // namespace fission::engine
