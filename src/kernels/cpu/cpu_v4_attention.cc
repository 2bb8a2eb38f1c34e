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

// The first position of a sequence's new tokens; new position p is row token_start + p - first of
// the step's rows in token order.
std::int64_t FirstNewPosition(const SeqAttention& s) { return s.kv_len - s.new_tokens; }

// Where the projections [kv | gate] of position p of sequence s are: the step's row (in token
// order) for a new position, the state slot's entry for an earlier one.
struct ProjectionSource {
  const Tensor& kv;
  const Tensor& gate;
  const Tensor& state;
  std::int64_t width, state_positions;

  void Find(const SeqAttention& s, std::int64_t p, const float*& kv_row, const float*& gate_row) const {
    const std::int64_t first = FirstNewPosition(s);
    if (p >= first) {
      const std::int64_t row = s.token_start + (p - first);
      kv_row = kv.ptr<float>() + row * width;
      gate_row = gate.ptr<float>() + row * width;
      return;
    }
    FISSION_CHECK(s.state_slot >= 0 && p >= first - state_positions, "compressor state for position ", p,
                  " (first new position ", first, ", state slot ", s.state_slot, ")");
    kv_row = state.ptr<float>() + (s.state_slot * state_positions + p % state_positions) * 2 * width;
    gate_row = kv_row + width;
  }
};

}  // namespace

void CpuV4Ops::Compress(const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                        std::span<const SeqAttention> seqs, std::span<const ClosedWindow> windows,
                        const CompressorShape& sh, const Tensor& pooled) {
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
    const SeqAttention& s = seqs[static_cast<std::size_t>(windows[i].seq)];
    const std::int64_t w = windows[i].window;
    std::vector<Slot> slots;
    if (sh.overlap && w > 0)  // the previous window's first halves (entry 0 has none: weight 0)
      for (std::int64_t j = 0; j < r; ++j) slots.push_back({(w - 1) * r + j, 0, j});
    for (std::int64_t j = 0; j < r; ++j) slots.push_back({w * r + j, sh.overlap ? d : 0, j});
    std::vector<const float*> kv_rows(slots.size()), gate_rows(slots.size());
    for (std::size_t j = 0; j < slots.size(); ++j) source.Find(s, slots[j].position, kv_rows[j], gate_rows[j]);
    std::vector<float> logit(slots.size());
    float* out = pooled.ptr<float>() + static_cast<std::int64_t>(i) * d;
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
                                     std::span<const SeqAttention> seqs, const CompressorShape& sh) {
  const std::int64_t width = sh.width(), keep = sh.state_positions();
  FISSION_CHECK(state.rank() == 2 && state.shape[1] == 2 * width && state.dtype == DType::kF32,
                "compressor state ", state.shape.ToString(), " for width ", width);
  for (const SeqAttention& s : seqs) {
    if (s.state_slot < 0) continue;
    FISSION_CHECK((s.state_slot + 1) * keep <= state.shape[0], "state slot ", s.state_slot);
    const std::int64_t first = FirstNewPosition(s);
    for (std::int64_t p = std::max(first, s.kv_len - keep); p < s.kv_len; ++p) {
      const std::int64_t row = s.token_start + (p - first);
      float* entry = state.ptr<float>() + (s.state_slot * keep + p % keep) * 2 * width;
      std::memcpy(entry, kv.ptr<float>() + row * width, width * sizeof(float));
      std::memcpy(entry + width, gate.ptr<float>() + row * width, width * sizeof(float));
    }
  }
}

void CpuV4Ops::Attention(const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                         const Tensor& selection, const Tensor& sinks, std::span<const SeqAttention> seqs,
                         const V4AttentionShape& sh, const Tensor& out) {
  const std::int64_t heads = sh.heads, d = sh.head_dim, win = sh.window;
  FISSION_CHECK(q.rank() == 3 && q.shape[1] == heads && q.shape[2] == d && kv.shape[1] == d && sinks.numel() == heads &&
                    out.shape == q.shape,
                "V4 attention q", q.shape.ToString(), " kv", kv.shape.ToString(), " sinks", sinks.shape.ToString());
  const bool selected = selection.data != nullptr;
  for (const SeqAttention& s : seqs) {
    const std::int64_t first = FirstNewPosition(s);
    auto entry_slot = [&](std::int64_t e) { return EntrySlot(s.block_table, sh.page_size, sh.ratio, e); };
#pragma omp parallel for schedule(dynamic) if (s.query_len * heads * d * (win + 8) > (1 << 16))
    for (std::int64_t t = 0; t < s.query_len; ++t) {
      const std::int64_t row = s.query_start + t, p = s.query_positions[t];
      // The query's keys, decoded into rows of `keys`: the window, then the compressed entries.
      std::vector<float> keys;
      auto add_stored = [&](const Tensor& cache, std::int64_t slot) {
        keys.resize(keys.size() + static_cast<std::size_t>(d));
        ReadV4Entry(cache, slot, d, sh.rope_dim, sh.kv_format, keys.data() + keys.size() - d);
      };
      for (std::int64_t pos = std::max<std::int64_t>(0, p - win + 1); pos <= p; ++pos) {
        if (pos >= first) {
          const float* r = kv.ptr<float>() + (s.token_start + pos - first) * d;
          keys.insert(keys.end(), r, r + d);
        } else {
          FISSION_CHECK(s.state_slot >= 0, "a sliding window without a state slot");
          add_stored(window_kv, s.state_slot * win + pos % win);
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
}

}  // namespace fission::kernels::cpu
