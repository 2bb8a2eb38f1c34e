// One rank's storage for a model's memory (memory_spec.h): for every cache class and layer, the
// entries of all pages (paged classes) or of all state slots (per-request classes), in the memory
// of the device the rank runs on. The model owns it (CausalLM::AllocateMemory); the engine only
// hands out page ids and state-slot ids.
#pragma once

#include <cstdint>
#include <vector>

#include "model/memory_spec.h"
#include "tensor/tensor.h"

namespace fission::model {

class ModelMemory {
 public:
  // Zero-filled storage for `plan`; an Error when the spec does not fit the plan's page size.
  ModelMemory(MemorySpec spec, const MemoryPlan& plan, Allocator* allocator);

  const MemorySpec& spec() const { return spec_; }
  const MemoryPlan& plan() const { return plan_; }
  // Entries of class `cls` in one layer: pages × entries per page, or state slots × entries per
  // request.
  std::int64_t num_entries(int cls) const { return entries_[cls]; }
  // The entries of class `cls`, layer `layer`: [num_entries, count] of the field's dtype for a
  // class of one field (an MLA latent row, say); [num_entries, entry_bytes] bytes (U8) otherwise,
  // the fields packed in declaration order.
  const Tensor& entries(int cls, int layer) const { return storage_[cls][layer].tensor(); }
  // Whether this is the storage of `plan` at the same addresses as `other` (graphs hold them).
  bool SameStorage(const std::vector<const void*>& other) const { return addresses() == other; }
  std::vector<const void*> addresses() const;

 private:
  MemorySpec spec_;
  MemoryPlan plan_;
  std::vector<std::int64_t> entries_;
  std::vector<std::vector<Buffer>> storage_;  // [class][layer]
};

}  // namespace fission::model
