#include "model/layers/v4_step_plan.h"

#include "model/memory_spec.h"

namespace fission::model {

V4StepPlan::V4StepPlan(const StepView& in, std::int64_t window, const std::vector<std::int64_t>& ratios) {
  window_slots.assign(static_cast<std::size_t>(in.num_tokens), -1);
  for (const kernels::SeqAttention& s : in.token_seqs) {
    const std::int64_t first = s.kv_len - s.new_tokens;
    FISSION_CHECK(s.state_slot >= 0, "a DeepSeek-V4 sequence without a state slot");
    for (std::int32_t t = 0; t < s.new_tokens; ++t) {
      const std::int64_t p = first + t;
      if (p >= s.kv_len - window) window_slots[s.token_start + t] = s.state_slot * window + p % window;
    }
  }
  if (!in.split()) {
    moe_token_ids.assign(in.token_ids.begin(), in.token_ids.end());
  } else {  // gathered row j holds token (j % rows) · C + j / rows (model/token_layout.h)
    const std::int64_t rows = in.rows, cp = in.cp_size;
    moe_token_ids.assign(static_cast<std::size_t>(rows * cp), 0);
    for (std::int64_t j = 0; j < rows * cp; ++j) {
      const std::int64_t token = (j % rows) * cp + j / rows;
      if (token < in.num_tokens) moe_token_ids[j] = in.all_token_ids[token];
    }
  }
  for (std::int64_t ratio : ratios) {
    if (closed.count(ratio) != 0) continue;
    V4Windows& w = closed[ratio];
    CacheClass entries;  // the slot rule of a paged class of `ratio` positions per entry
    entries.tokens_per_entry = static_cast<std::int32_t>(ratio);
    for (std::size_t i = 0; i < in.token_seqs.size(); ++i) {
      const kernels::SeqAttention& s = in.token_seqs[i];
      const std::int64_t first = s.kv_len - s.new_tokens;
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
