// How much of its memory (model/memory_spec.h) the engine gives a model: pages for the paged
// classes and state slots for the per-request ones.
//
// Budget: a model in host memory gets --max-total-tokens (default kDefaultMaxTotalTokens) worth of
// pages; a model on a device gets what --mem-fraction-static leaves after the weights (free −
// total · (1 − fraction), the smallest over its devices), capped by --max-total-tokens when that
// is given, as SGLang does; an explicit byte budget (tests, tools) is taken as it is. State slots:
// **Decision** one per running request up to --max-running-requests, taken from a byte budget
// first but never more than half of it (the rest is pages); in host memory the token budget sizes
// the pages and every running request gets a slot. A model without per-request classes gets none.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine_config.h"
#include "kernels/backend.h"
#include "model/memory_spec.h"

namespace fission::engine {

// Bytes in a GiB, for the memory lines of the log and the errors.
inline constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

// The plan for `spec` under `config`, with `device` the model's device memory (nullopt: host
// memory). An Error says what is too small and which flag to change.
model::MemoryPlan PlanMemory(const model::MemorySpec& spec, const EngineConfig& config,
                             const std::optional<kernels::DeviceMemory>& device);

// One line for the log: pages, tokens, state slots and bytes per device.
std::string DescribeMemoryPlan(const model::MemorySpec& spec, const model::MemoryPlan& plan);

}  // namespace fission::engine
