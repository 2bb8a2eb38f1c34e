#include "engine/memory_planner.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace fission::engine {
namespace {

// Pages are indexed by int32 slots of page_size rows each.
constexpr std::int64_t kMaxSlots = std::numeric_limits<std::int32_t>::max();

std::int64_t PagesForTokens(std::int64_t tokens, std::int32_t page_size) {
  if (tokens < page_size)
    Fail("--max-total-tokens must be at least one page (--page-size ", page_size, "), got ", tokens);
  const std::int64_t pages = tokens / page_size;
  if (pages > kMaxSlots / page_size) Fail("--max-total-tokens is too large: ", tokens);
  return pages;
}

// Splits `bytes` into state slots (at most half of it) and pages.
model::MemoryPlan SplitBytes(const model::MemorySpec& spec, const EngineConfig& config, std::int64_t bytes,
                             std::int64_t wanted_slots) {
  model::MemoryPlan plan;
  plan.page_size = config.page_size;
  const std::int64_t slot_bytes = spec.state_slot_bytes(), page_bytes = spec.page_bytes(config.page_size);
  if (wanted_slots > 0) {
    plan.num_state_slots = std::min(wanted_slots, bytes / 2 / std::max<std::int64_t>(slot_bytes, 1));
    if (plan.num_state_slots < 1)
      Fail("the memory budget of ", bytes, " bytes is below two state slots (", slot_bytes,
           " bytes each); raise --mem-fraction-static");
  }
  const std::int64_t left = bytes - plan.num_state_slots * slot_bytes;
  FISSION_CHECK(page_bytes > 0, "the model declares no paged memory");
  plan.num_pages = std::min(left / page_bytes, kMaxSlots / config.page_size);
  if (plan.num_pages < 1)
    Fail("the memory budget of ", bytes, " bytes is below one page (", page_bytes, " bytes) after ",
         plan.num_state_slots, " state slots; raise --mem-fraction-static");
  return plan;
}

}  // namespace

model::MemoryPlan PlanMemory(const model::MemorySpec& spec, const EngineConfig& config,
                             const std::optional<kernels::DeviceMemory>& device) {
  spec.Validate(config.page_size);
  const std::int64_t wanted_slots = spec.has_per_request_state() ? config.max_running_requests : 0;
  if (config.kv_cache_bytes > 0) return SplitBytes(spec, config, config.kv_cache_bytes, wanted_slots);
  if (!device) {
    const std::int64_t tokens = config.max_total_tokens > 0 ? config.max_total_tokens : kDefaultMaxTotalTokens;
    return {PagesForTokens(tokens, config.page_size), config.page_size, wanted_slots};
  }
  const double fraction = config.mem_fraction_static > 0 ? config.mem_fraction_static : kDefaultMemFractionStatic;
  const std::int64_t reserved = static_cast<std::int64_t>(static_cast<double>(device->total_bytes) * (1.0 - fraction));
  const std::int64_t bytes = device->free_bytes - reserved;
  if (bytes <= 0)
    Fail("no device memory is left for the KV cache: after the weights ", device->free_bytes / kBytesPerGiB, " GiB of ",
         device->total_bytes / kBytesPerGiB, " GiB are free and --mem-fraction-static ", fraction, " keeps ",
         reserved / kBytesPerGiB, " GiB for activations; raise --mem-fraction-static or load fewer weights per device");
  model::MemoryPlan plan = SplitBytes(spec, config, bytes, wanted_slots);
  if (config.max_total_tokens > 0)
    plan.num_pages = std::min(plan.num_pages, PagesForTokens(config.max_total_tokens, config.page_size));
  return plan;
}

std::string DescribeMemoryPlan(const model::MemorySpec& spec, const model::MemoryPlan& plan) {
  const double bytes = static_cast<double>(plan.num_pages) * static_cast<double>(spec.page_bytes(plan.page_size)) +
                       static_cast<double>(plan.num_state_slots) * static_cast<double>(spec.state_slot_bytes());
  std::string text = StrCat(plan.num_pages, " pages of ", plan.page_size, " tokens (", plan.num_pages * plan.page_size,
                            " tokens, ", spec.bytes_per_token(plan.page_size), " bytes per token)");
  if (plan.num_state_slots > 0)
    text = StrCat(text, " and ", plan.num_state_slots, " state slots of ", spec.state_slot_bytes(), " bytes");
  return StrCat(text, ": ", bytes / kBytesPerGiB, " GiB per device");
}

}  // namespace fission::engine
