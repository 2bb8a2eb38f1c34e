#include "model/model_memory.h"

#include <cstring>

#include "base/error.h"

namespace fission::model {

ModelMemory::ModelMemory(MemorySpec spec, const MemoryPlan& plan, Allocator* allocator)
    : spec_(std::move(spec)), plan_(plan) {
  FISSION_CHECK(plan.num_pages > 0 && plan.page_size > 0 && plan.num_state_slots >= 0, "memory plan of ",
                plan.num_pages, " pages of ", plan.page_size, " and ", plan.num_state_slots, " state slots");
  spec_.Validate(plan.page_size);
  if (spec_.has_per_request_state() && plan.num_state_slots < 1)
    Fail("the model keeps per-request state but the memory plan has no state slots");
  for (const CacheClass& c : spec_.classes) {
    const std::int64_t n = c.kind == CacheKind::kPaged ? plan.num_pages * c.entries_per_page(plan.page_size)
                                                       : plan.num_state_slots * c.entries_per_request;
    entries_.push_back(n);
    const bool typed = c.fields.size() == 1;
    const DType dtype = typed ? c.fields[0].dtype : DType::kU8;
    const std::int64_t width = typed ? c.fields[0].count : static_cast<std::int64_t>(c.entry_bytes());
    std::vector<Buffer>& layers = storage_.emplace_back();
    for (int l = 0; l < c.layers; ++l) {
      layers.emplace_back(dtype, Shape{std::max<std::int64_t>(n, 1), width}, allocator);
      if (allocator->device().type == DeviceType::kCpu)
        std::memset(layers.back().tensor().data, 0, layers.back().tensor().bytes());
    }
  }
}

std::vector<const void*> ModelMemory::addresses() const {
  std::vector<const void*> out;
  for (const auto& layers : storage_)
    for (const Buffer& b : layers) out.push_back(b.tensor().data);
  return out;
}

}  // namespace fission::model
