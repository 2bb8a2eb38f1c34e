#include "model/layers/v4_step_plan.h"

#include <algorithm>

#include "model/memory_spec.h"

namespace fission::model {
namespace {

std::size_t AlignUp(std::size_t n) { return (n + 15) / 16 * 16; }

// Places a sequence of `new_tokens` new tokens keeps for windows of `ratio`: at most that many
// positions (k + 1)·ratio - 1 lie among them.
std::int64_t Places(std::int64_t new_tokens, std::int64_t ratio) { return (new_tokens + ratio - 1) / ratio; }

template <typename T>
std::span<T> At(std::span<std::byte> region, std::size_t offset, std::size_t count) {
  return {reinterpret_cast<T*>(region.data() + offset), count};
}
template <typename T>
std::span<const T> At(std::span<const std::byte> region, std::size_t offset, std::size_t count) {
  return {reinterpret_cast<const T*>(region.data() + offset), count};
}

// Every sequence T query rows at rows [i·T, (i + 1)·T), its last one at its last position, in an
// unsplit step: a decode or verify step.
bool Uniform(const StepView& in) {
  if (in.split() || in.seqs.empty()) return false;
  const std::int32_t t = in.seqs.front().query_len;
  for (std::size_t i = 0; i < in.seqs.size(); ++i) {
    const kernels::SeqAttention& s = in.seqs[i];
    if (s.query_len != t || s.query_start != static_cast<std::int32_t>(i) * t || t == 0 ||
        s.query_positions.back() != s.kv_len - 1)
      return false;
  }
  return static_cast<std::int64_t>(in.seqs.size()) * t == in.rows;
}

}  // namespace

V4StepPlanner::V4StepPlanner(std::int64_t window, const std::vector<std::int64_t>& ratios,
                             const std::vector<std::int64_t>& keeps, int cp_size)
    : window_(window), ratios_(ratios.begin(), ratios.end()), keeps_(keeps.begin(), keeps.end()), cp_size_(cp_size) {
  keeps_.insert(window);
}

V4StepPlanner::Layout V4StepPlanner::MakeLayout(std::int64_t rows, std::int64_t tokens, std::int64_t sequences) const {
  const auto t = static_cast<std::size_t>(tokens);
  Layout l;
  std::size_t at = 0;
  for (std::int64_t keep : keeps_) {
    l.rings[keep] = at;
    at = AlignUp(at + t * 8);
  }
  l.moe_ids = at;
  at = AlignUp(at + static_cast<std::size_t>(rows * cp_size_) * 4);
  for (std::int64_t ratio : ratios_) {
    Layout::Windows& w = l.closed[ratio];
    // Σ ceil(new_s / ratio) ≤ sequences + tokens / ratio, for any split of the tokens.
    w.capacity = sequences + tokens / ratio;
    const auto c = static_cast<std::size_t>(w.capacity);
    w.windows = at;
    w.positions = AlignUp(w.windows + c * sizeof(kernels::ClosedWindow));
    w.slots = AlignUp(w.positions + c * 4);
    at = AlignUp(w.slots + c * 8);
  }
  l.queries = at;
  l.bytes = AlignUp(at + static_cast<std::size_t>(rows) * sizeof(kernels::V4QueryRow));
  return l;
}

std::size_t V4StepPlanner::Bytes(std::int64_t rows, std::int64_t tokens, std::int64_t sequences) const {
  return MakeLayout(rows, tokens, sequences).bytes;
}

void V4StepPlanner::Write(const StepView& in, std::span<std::byte> region) const {
  const Layout l = MakeLayout(in.rows, in.num_tokens, static_cast<std::int64_t>(in.token_seqs.size()));
  FISSION_CHECK(region.size() >= l.bytes, "DeepSeek-V4's step plan needs ", l.bytes, " bytes, the block keeps ",
                region.size());
  FISSION_CHECK(in.cp_size == 1 || in.cp_size == cp_size_, "a step split over ", in.cp_size, " ranks, planned for ",
                cp_size_);
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  for (const auto& [keep, offset] : l.rings) kernels::RingSlots(in.token_seqs, keep, At<std::int64_t>(region, offset, tokens));

  const std::span<std::int32_t> moe_ids = At<std::int32_t>(region, l.moe_ids, static_cast<std::size_t>(in.rows * in.cp_size));
  if (!in.split()) {
    std::copy(in.token_ids.begin(), in.token_ids.end(), moe_ids.begin());
  } else {  // gathered row j holds token (j % rows) · C + j / rows (model/token_layout.h)
    const std::int64_t rows = in.rows, cp = in.cp_size;
    for (std::int64_t j = 0; j < rows * cp; ++j) {
      const std::int64_t token = (j % rows) * cp + j / rows;
      moe_ids[j] = token < in.num_tokens ? in.all_token_ids[token] : 0;
    }
  }

  for (const auto& [ratio, at] : l.closed) {
    CacheClass entries;  // the slot rule of a paged class of `ratio` positions per entry
    entries.tokens_per_entry = static_cast<std::int32_t>(ratio);
    const auto cap = static_cast<std::size_t>(at.capacity);
    const auto windows = At<kernels::ClosedWindow>(region, at.windows, cap);
    const auto positions = At<std::int32_t>(region, at.positions, cap);
    const auto slots = At<std::int64_t>(region, at.slots, cap);
    std::size_t k = 0;
    for (const kernels::SeqAttention& s : in.token_seqs) {
      const std::int64_t first = s.kv_len - s.new_tokens, places = Places(s.new_tokens, ratio);
      // Window w closes when position (w + 1)·ratio - 1 is new in this step.
      std::int64_t w = first / ratio, used = 0;
      for (; (w + 1) * ratio <= s.kv_len; ++w, ++used, ++k) {
        windows[k] = kernels::ClosedWindowOf(s, w);
        positions[k] = static_cast<std::int32_t>(w * ratio);
        slots[k] = PagedEntrySlot(entries, s.block_table, in.page_size, w * ratio);
      }
      FISSION_CHECK(used <= places, "a step closes ", used, " windows of ", ratio, " in ", s.new_tokens, " tokens");
      for (; used < places; ++used, ++k) {
        windows[k] = kernels::ClosedWindow{};
        positions[k] = 0;
        slots[k] = -1;
      }
    }
  }

  const auto rows = At<kernels::V4QueryRow>(region, l.queries, static_cast<std::size_t>(in.rows));
  std::fill(rows.begin(), rows.end(), kernels::V4QueryRow{});
  kernels::QueryRowsOf(in.seqs, in.block_tables, in.table_width, window_, rows);
}

V4StepPlan V4StepPlanner::Read(const StepView& in) const {
  const Layout l = MakeLayout(in.rows, in.num_tokens, static_cast<std::int64_t>(in.token_seqs.size()));
  FISSION_CHECK(in.family.size() >= l.bytes, "a step without DeepSeek-V4's plan in its input block");
  const std::span<const std::byte> region = in.family;
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  V4StepPlan plan;
  for (const auto& [keep, offset] : l.rings) plan.ring_slots[keep] = At<std::int64_t>(region, offset, tokens);
  plan.moe_token_ids = At<std::int32_t>(region, l.moe_ids, static_cast<std::size_t>(in.rows * in.cp_size));
  for (const auto& [ratio, at] : l.closed) {
    std::size_t count = 0;
    for (const kernels::SeqAttention& s : in.token_seqs) count += static_cast<std::size_t>(Places(s.new_tokens, ratio));
    plan.closed[ratio] = {At<kernels::ClosedWindow>(region, at.windows, count), At<std::int32_t>(region, at.positions, count),
                          At<std::int64_t>(region, at.slots, count)};
  }
  std::size_t query_rows = 0;
  for (const kernels::SeqAttention& s : in.seqs) query_rows += static_cast<std::size_t>(s.query_len);
  plan.queries.rows = At<kernels::V4QueryRow>(region, l.queries, query_rows);
  plan.queries.tables = in.block_tables;
  plan.queries.table_width = in.table_width;
  plan.queries.uniform = Uniform(in);
  return plan;
}

}  // namespace fission::model
