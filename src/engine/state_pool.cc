#include "engine/state_pool.h"

#include "base/error.h"

namespace fission::engine {

StatePool::StatePool(std::int32_t num_slots) : used_(num_slots, false) {
  FISSION_CHECK(num_slots >= 0);
  for (std::int32_t s = num_slots - 1; s >= 0; --s) free_.push_back(s);
}

std::int32_t StatePool::Reserve() {
  if (free_.empty()) return -1;
  const std::int32_t slot = free_.back();
  free_.pop_back();
  used_[slot] = true;
  return slot;
}

void StatePool::Free(std::int32_t slot) {
  FISSION_CHECK(slot >= 0 && slot < num_slots() && used_[slot], "freeing state slot ", slot, " that is not held");
  used_[slot] = false;
  free_.push_back(slot);
}

}  // namespace fission::engine
