#include "model/layers/v4_step_plan.h"

#include "model/memory_spec.h"

namespace fission::model {

V4StepPlan::V4StepPlan(const StepView& in, std::int64_t window, const std::vector<std::int64_t>& ratios) {
  window_slots.assign(static_cast<std::size_t>(in.rows), -1);
  for (const kernels::SeqAttention& s : in.seqs) {
    const std::int64_t first = s.kv_len - s.query_len;
    FISSION_CHECK(s.state_slot >= 0, "a DeepSeek-V4 sequence without a state slot");
    for (std::int32_t t = 0; t < s.query_len; ++t) {
      const std::int64_t p = first + t;
      if (p >= s.kv_len - window) window_slots[s.query_start + t] = s.state_slot * window + p % window;
    }
  }
  for (std::int64_t ratio : ratios) {
    if (closed.count(ratio) != 0) continue;
    V4Windows& w = closed[ratio];
    CacheClass entries;  // the slot rule of a paged class of `ratio` positions per entry
    entries.tokens_per_entry = static_cast<std::int32_t>(ratio);
    for (std::size_t i = 0; i < in.seqs.size(); ++i) {
      const kernels::SeqAttention& s = in.seqs[i];
      const std::int64_t first = s.kv_len - s.query_len;
      // Window k closes when position (k + 1)·ratio - 1 is new in this step.
      for (std::int64_t k = (first + 1 + ratio - 1) / ratio - 1; (k + 1) * ratio <= s.kv_len; ++k) {
        w.windows.push_back({static_cast<std::int32_t>(i), static_cast<std::int32_t>(k)});
        w.positions.push_back(static_cast<std::int32_t>(k * ratio));
        w.slots.push_back(PagedEntrySlot(entries, s.block_table, in.page_size, k * ratio));
      }
    }
  }
}

}  // namespace fission::model
