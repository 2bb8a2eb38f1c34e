// DeepSeek-V4 on the CPU: the compressors (softmax-gated pooling of windows, with the carry-over
// of a sequence's last positions in its state slot) and attention over a sliding window plus
// compressed entries with a per-head sink (kernels/v4_ops.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_v4.h"

namespace fission::kernels::cpu {
namespace {

// Where the projections [kv | gate] of position p of a closed window's sequence are: the step's
// row (in token order) for a new position, the state slot's entry for an earlier one.
struct ProjectionSource {
  const Tensor& kv;
  const Tensor& gate;
  const Tensor& state;
  std::int64_t width, state_positions;

  void Find(const ClosedWindow& w, std::int64_t p, const float*& kv_row, const float*& gate_row) const {
    if (p >= w.first_new) {
      const std::int64_t row = w.token_start + (p - w.first_new);
      FISSION_CHECK(row < kv.shape[0], "compressor row ", row, " outside the step's ", kv.shape[0], " rows");
      kv_row = kv.ptr<float>() + row * width;
      gate_row = gate.ptr<float>() + row * width;
      return;
    }
    FISSION_CHECK(w.state_slot >= 0 && p >= w.first_new - state_positions &&
                      (w.state_slot + 1) * state_positions <= state.shape[0],
                  "compressor state for position ", p, " (first new position ", w.first_new, ", state slot ",
                  w.state_slot, ")");
    kv_row = state.ptr<float>() + (w.state_slot * state_positions + p % state_positions) * 2 * width;
    gate_row = kv_row + width;
  }
};

}  // namespace

void CpuV4Ops::Compress(const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                        std::span<const ClosedWindow> windows, const CompressorShape& sh, const Tensor& pooled) {
  const std::int64_t d = sh.head_dim, width = sh.width(), r = sh.ratio;
  FISSION_CHECK(kv.shape[1] == width && gate.shape == kv.shape && ape.shape == Shape({r, width}) &&
                    pooled.shape == Shape({static_cast<std::int64_t>(windows.size()), d}),
                "Compress kv", kv.shape.ToString(), " ape", ape.shape.ToString(), " pooled", pooled.shape.ToString(),
                " for ratio ", r, " and width ", width);
  const ProjectionSource source{kv, gate, state, width, sh.state_positions()};
  // Slot j of an entry: (position, channel offset of its half, ape row).
  struct Slot {
    std::int64_t position, half, ape_row;
  };
#pragma omp parallel for schedule(dynamic) if (static_cast<std::int64_t>(windows.size()) * r * width > (1 << 15))
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const ClosedWindow& cw = windows[i];
    const std::int64_t w = cw.window;
    float* out = pooled.ptr<float>() + static_cast<std::int64_t>(i) * d;
    if (w < 0) {  // a place kept for a window that does not close
      std::fill(out, out + d, 0.0f);
      continue;
    }
    std::vector<Slot> slots;
    if (sh.overlap && w > 0)  // the previous window's first halves (entry 0 has none: weight 0)
      for (std::int64_t j = 0; j < r; ++j) slots.push_back({(w - 1) * r + j, 0, j});
    for (std::int64_t j = 0; j < r; ++j) slots.push_back({w * r + j, sh.overlap ? d : 0, j});
    std::vector<const float*> kv_rows(slots.size()), gate_rows(slots.size());
    for (std::size_t j = 0; j < slots.size(); ++j) source.Find(cw, slots[j].position, kv_rows[j], gate_rows[j]);
    std::vector<float> logit(slots.size());
    for (std::int64_t ch = 0; ch < d; ++ch) {
      float top = -std::numeric_limits<float>::infinity();
      for (std::size_t j = 0; j < slots.size(); ++j) {
        const std::int64_t c = slots[j].half + ch;
        logit[j] = gate_rows[j][c] + ape.ptr<float>()[slots[j].ape_row * width + c];
        top = std::max(top, logit[j]);
      }
      float sum = 0.0f;
      for (float& l : logit) sum += (l = std::exp(l - top));
      float acc = 0.0f;
      for (std::size_t j = 0; j < slots.size(); ++j) acc += kv_rows[j][slots[j].half + ch] * (logit[j] / sum);
      out[ch] = acc;
    }
  }
}

void CpuV4Ops::UpdateCompressorState(const Tensor& kv, const Tensor& gate, const Tensor& state,
                                     std::span<const std::int64_t> slots, const CompressorShape& sh) {
  const std::int64_t width = sh.width();
  FISSION_CHECK(state.rank() == 2 && state.shape[1] == 2 * width && state.dtype == DType::kF32,
                "compressor state ", state.shape.ToString(), " for width ", width);
  FISSION_CHECK(static_cast<std::int64_t>(slots.size()) <= kv.shape[0], slots.size(), " state slots for ", kv.shape[0],
                " rows");
  for (std::size_t row = 0; row < slots.size(); ++row) {
    if (slots[row] < 0) continue;
    FISSION_CHECK(slots[row] < state.shape[0], "state entry ", slots[row], " outside the state of ", state.shape[0]);
    float* entry = state.ptr<float>() + slots[row] * 2 * width;
    std::memcpy(entry, kv.ptr<float>() + static_cast<std::int64_t>(row) * width, width * sizeof(float));
    std::memcpy(entry + width, gate.ptr<float>() + static_cast<std::int64_t>(row) * width, width * sizeof(float));
  }
}

void CpuV4Ops::Attention(const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                         const Tensor& selection, const Tensor& sinks, const V4Queries& queries,
                         const V4AttentionShape& sh, const Tensor& out) {
  const std::int64_t heads = sh.heads, d = sh.head_dim, win = sh.window;
  FISSION_CHECK(q.rank() == 3 && q.shape[1] == heads && q.shape[2] == d && kv.shape[1] == d && sinks.numel() == heads &&
                    out.shape == q.shape,
                "V4 attention q", q.shape.ToString(), " kv", kv.shape.ToString(), " sinks", sinks.shape.ToString());
  const bool selected = selection.data != nullptr;
  const auto count_rows = static_cast<std::int64_t>(queries.rows.size());
#pragma omp parallel for schedule(dynamic) if (count_rows * heads * d * (win + 8) > (1 << 16))
  for (std::int64_t i = 0; i < count_rows; ++i) {
    const V4QueryRow& r = queries.rows[static_cast<std::size_t>(i)];
    const std::int64_t row = r.row, p = r.position;
    FISSION_CHECK(row >= 0 && row < q.shape[0] && p >= 0, "V4 attention query row ", row, " at position ", p);
    const std::span<const std::int32_t> table = sh.ratio > 0 ? queries.table(r) : std::span<const std::int32_t>();
    auto entry_slot = [&](std::int64_t e) { return EntrySlot(table, sh.page_size, sh.ratio, e); };
    // The query's keys, decoded into rows of `keys`: the window, then the compressed entries.
    std::vector<float> keys;
    auto add_stored = [&](const Tensor& cache, std::int64_t slot) {
      keys.resize(keys.size() + static_cast<std::size_t>(d));
      ReadV4Entry(cache, slot, d, sh.rope_dim, sh.kv_format, keys.data() + keys.size() - d);
    };
    for (std::int64_t pos = std::max<std::int64_t>(0, p - win + 1); pos <= p; ++pos) {
      if (pos >= r.first_new) {
        const float* k = kv.ptr<float>() + (r.token_start + pos - r.first_new) * d;
        keys.insert(keys.end(), k, k + d);
      } else {
        FISSION_CHECK(r.ring_base >= 0, "a sliding window without a state slot");
        add_stored(window_kv, r.ring_base + pos % win);
      }
    }
    if (sh.ratio > 0 && !selected) {
      for (std::int64_t e = 0; e < (p + 1) / sh.ratio; ++e) add_stored(entries, entry_slot(e));
    } else if (sh.ratio > 0) {
      const std::int32_t* sel = selection.ptr<std::int32_t>() + row * selection.shape[1];
      for (std::int64_t j = 0; j < selection.shape[1] && sel[j] >= 0; ++j) add_stored(entries, entry_slot(sel[j]));
    }
    const std::size_t count = keys.size() / static_cast<std::size_t>(d);
    std::vector<float> logit(count);
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* qh = q.ptr<float>() + (row * heads + h) * d;
      const float sink = sinks.ptr<float>()[h];
      float top = sink;
      for (std::size_t k = 0; k < count; ++k) top = std::max(top, logit[k] = sh.softmax_scale * Dot(qh, &keys[k * d], d));
      float sum = std::exp(sink - top);
      for (float& l : logit) sum += (l = std::exp(l - top));
      float* o = out.ptr<float>() + (row * heads + h) * d;
      for (std::int64_t c = 0; c < d; ++c) {
        float acc = 0.0f;
        for (std::size_t k = 0; k < count; ++k) acc += (logit[k] / sum) * keys[k * d + c];
        o[c] = acc;
      }
    }
  }
}

}  // namespace fission::kernels::cpu
