// What every layer's forward needs besides its own weights: the backend, the step's token
// positions and per-sequence attention metadata.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"

namespace fission::model {

enum class MlaForm { kAuto, kExpanded, kAbsorbed };

struct StepContext {
  kernels::Backend* backend = nullptr;
  std::span<const std::int32_t> positions;
  std::span<const std::int64_t> kv_slots;
  std::vector<kernels::SeqAttention> seqs;
  std::int64_t page_size = 0;
  MlaForm mla_form = MlaForm::kAuto;
};

}  // namespace fission::model
