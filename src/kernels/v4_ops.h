// DeepSeek-V4's operations (Backend::v4()): the mHC residual streams, the compressors that pool
// windows of tokens into KV entries, attention over a sliding window plus compressed entries with
// a per-head sink, the grouped output projection, V4's rope (interleaved, with its inverse on the
// output), and its MoE pieces (sqrt-softplus and hash routing, SwiGLU clamped at a limit).
//
// Step metadata comes as host spans of records that are whole by themselves (the windows a step
// closes, the query rows, the ring slot of every token), resolved from the step's sequences by the
// model's step plan (model/layers/v4_step_plan.h) and written into the step-input block, so a
// device backend reads them from the block's device copy and a decode step can be captured.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "base/error.h"
#include "kernels/mla_ops.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace fission::kernels {

// The hyper-connection residual: `mult` streams of `hidden` values per token.
struct HyperShape {
  std::int64_t mult = 4;
  std::int64_t hidden = 0;
  std::int32_t sinkhorn_iters = 20;
  float eps = 1e-6f;       // hc_eps: added to the weights and to every Sinkhorn denominator
  float norm_eps = 1e-6f;  // the unweighted RMSNorm of the flattened streams
};

// One window a step closes: compressed entry `window` of a sequence, pooling positions
// [window·ratio, (window+1)·ratio) (and, overlapping, the window before it). A position from
// first_new on is the step's row token_start + position - first_new (the step's tokens in token
// order); an earlier one is in the sequence's compressor state slot. window -1 is a place the
// step's plan keeps for a window that does not close (its pooled row is zeros, stored nowhere), so
// the list's length follows from the step's shape alone.
struct ClosedWindow {
  std::int32_t window = -1;
  std::int32_t first_new = 0;
  std::int32_t token_start = 0;
  std::int32_t state_slot = -1;
};

inline ClosedWindow ClosedWindowOf(const SeqAttention& s, std::int64_t window) {
  return {static_cast<std::int32_t>(window), s.kv_len - s.new_tokens, s.token_start, s.state_slot};
}

// The slot of every token of the step (`token_seqs`, StepView::token_seqs) in a per-request ring of
// `keep` positions: state slot · keep + position % keep for the sequence's last `keep` positions,
// -1 for a position that leaves the ring before the step ends or a sequence without a state slot.
// The window ring's slots (keep = sliding_window) and the compressor state's (keep =
// CompressorShape::state_positions()).
inline void RingSlots(std::span<const SeqAttention> token_seqs, std::int64_t keep, std::span<std::int64_t> slots) {
  std::fill(slots.begin(), slots.end(), -1);
  for (const SeqAttention& s : token_seqs) {
    const std::int64_t first = s.kv_len - s.new_tokens;
    if (s.state_slot < 0) continue;
    for (std::int32_t t = 0; t < s.new_tokens; ++t)
      if (first + t >= s.kv_len - keep) slots[s.token_start + t] = s.state_slot * keep + (first + t) % keep;
  }
}

struct CompressorShape {
  std::int64_t ratio = 4;     // positions per entry
  std::int64_t head_dim = 0;  // values of one entry
  // CSA's overlapping windows: each token projects 2·head_dim values; entry w pools the first half
  // of window w-1's tokens with the second half of window w's (2·ratio slots). HCA pools the
  // ratio tokens of its window.
  bool overlap = false;
  std::int64_t width() const { return overlap ? 2 * head_dim : head_dim; }
  // Positions a state slot keeps: the last 2·ratio (overlap) or ratio positions before the step.
  std::int64_t state_positions() const { return overlap ? 2 * ratio : ratio; }
};

// How V4's window keys and compressed entries are stored. kExact: head_dim values in the cache's
// dtype. kFp8 (--kv-cache-dtype fp8_e4m3): the leading head_dim - rope values ("nope") as e4m3
// codes with one power-of-two (ue8m0) scale per block of 64 (a shorter last block has its own),
// then the rope values in bf16, packed in V4KvEntryBytes bytes. It is the rounding DeepSeek's
// reference trains with (act_quant over blocks of 64 with ue8m0 scales, rope kept in bf16), so
// storing an entry loses nothing once RoundToStorage has rounded it.
enum class V4KvFormat : std::uint8_t { kExact, kFp8 };

inline constexpr std::int64_t kV4Fp8Block = 64;

inline std::int64_t V4KvScaleCount(std::int64_t nope) { return (nope + kV4Fp8Block - 1) / kV4Fp8Block; }
inline std::int64_t V4KvEntryBytes(std::int64_t head_dim, std::int64_t rope) {
  const std::int64_t nope = head_dim - rope;
  return nope + V4KvScaleCount(nope) + 2 * rope;
}

struct V4AttentionShape {
  std::int64_t heads = 0;     // this rank's heads
  std::int64_t head_dim = 0;  // of the one shared KV head, used as key and value
  std::int64_t window = 0;    // sliding_window: a query sees positions (p - window, p]
  float softmax_scale = 1.0f;
  std::int64_t page_size = 0;
  // Compressed entries, one per `ratio` positions (0: a sliding-window layer). Entry e is visible
  // to a query at position p when e < (p + 1) / ratio: every such entry (HCA), or those the
  // indexer selected (CSA).
  std::int64_t ratio = 0;
  // How the ring and the entries are stored (the step's own keys come as fp32 rows).
  V4KvFormat kv_format = V4KvFormat::kExact;
  std::int64_t rope_dim = 0;
};

// One query row of V4's attention with where its keys are: its row and position, the first
// position of its sequence's new tokens and their first row among the step's keys, its ring's first
// slot (state slot · window; -1: no slot) and its sequence's row of the step's block tables.
struct V4QueryRow {
  std::int32_t row = 0, position = 0, first_new = 0, token_start = 0, ring_base = -1, table = 0;
};

// The query rows of a step and its block tables [sequences, table_width] (StepView::block_tables).
struct V4Queries {
  std::span<const V4QueryRow> rows;
  std::span<const std::int32_t> tables;
  std::int64_t table_width = 0;
  // Every sequence has the same number of rows, its last row at its last position (a decode or a
  // verify step): the attention's work then depends on the shape alone, not on the positions.
  bool uniform = false;
  std::span<const std::int32_t> table(const V4QueryRow& r) const {
    return tables.subspan(static_cast<std::size_t>(r.table * table_width), static_cast<std::size_t>(table_width));
  }
};

// The rows of `seqs` (this rank's queries, each sequence's table a row of `tables`), in order.
inline void QueryRowsOf(std::span<const SeqAttention> seqs, std::span<const std::int32_t> tables,
                        std::int64_t table_width, std::int64_t window, std::span<V4QueryRow> rows) {
  std::size_t k = 0;
  for (const SeqAttention& s : seqs) {
    const std::ptrdiff_t offset = s.block_table.data() - tables.data();
    FISSION_CHECK(table_width > 0 && offset >= 0 && offset % table_width == 0 &&
                      offset + static_cast<std::ptrdiff_t>(s.block_table.size()) <= static_cast<std::ptrdiff_t>(tables.size()),
                  "a sequence's block table is not a row of the step's tables");
    const auto table = static_cast<std::int32_t>(offset / table_width);
    for (std::int32_t t = 0; t < s.query_len; ++t)
      rows[k++] = {s.query_start + t, s.query_positions[static_cast<std::size_t>(t)], s.kv_len - s.new_tokens,
                   s.token_start, s.state_slot >= 0 ? static_cast<std::int32_t>(s.state_slot * window) : -1, table};
  }
}

// RouteSqrtSoftplus's arguments (every backend checks them alike): hash routing takes a token id
// per row and an I32 table of top_k ids per token; score routing a bias per expert.
inline void CheckSqrtSoftplusRouting(const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                                     std::span<const std::int32_t> token_ids, std::int64_t top_k) {
  FISSION_CHECK(router_logits.rank() == 2, "router logits ", router_logits.shape.ToString());
  const std::int64_t n = router_logits.shape[0], experts = router_logits.shape[1];
  FISSION_CHECK(hash_table.data != nullptr ? static_cast<std::int64_t>(token_ids.size()) == n &&
                                                 hash_table.rank() == 2 && hash_table.shape[1] == top_k &&
                                                 hash_table.dtype == DType::kI32
                                           : bias.numel() == experts,
                "sqrt-softplus routing of ", n, " rows: ", token_ids.size(), " token ids, hash table ",
                hash_table.shape.ToString(), ", bias ", bias.shape.ToString());
}

class V4Ops {
 public:
  virtual ~V4Ops() = default;

  // x [n, hidden] copied into each of the mult streams of out [n, mult, hidden].
  virtual void ExpandStreams(const Tensor& x, const Tensor& out) = 0;
  // The mHC weights of one sublayer from streams [n, mult, hidden]: mixes = fn · RMSNorm(flat
  // streams) (fn [(2+mult)·mult, mult·hidden], no weight), then pre = sigmoid(mixes[:m]·scale[0] +
  // base) + eps, post = 2·sigmoid(mixes[m:2m]·scale[1] + base), comb [m, m] = softmax over its
  // rows of mixes[2m:]·scale[2] + base, plus eps, made doubly stochastic by Sinkhorn iterations
  // (columns first, then sinkhorn_iters - 1 rounds of rows and columns). collapsed [n, hidden] =
  // Σ_j pre_j · stream_j; post [n, mult]; comb [n, mult, mult].
  virtual void HyperPre(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                        const HyperShape& shape, const Tensor& collapsed, const Tensor& post, const Tensor& comb) = 0;
  // out [n, mult, hidden]: stream k = post_k · block_out + Σ_j comb[j, k] · stream_j. `out` must
  // not alias `streams`.
  virtual void HyperPost(const Tensor& block_out, const Tensor& streams, const Tensor& post, const Tensor& comb,
                         const Tensor& out) = 0;
  // The final collapse: pre = sigmoid((fn · RMSNorm(flat)) · scale[0] + base) + eps (fn [mult,
  // mult·hidden]); out [n, hidden] = Σ_j pre_j · stream_j.
  virtual void HyperHead(const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                         const HyperShape& shape, const Tensor& out) = 0;

  // V4's rope on dims [offset, offset + dim) of every head of x [n, heads, head_dim], in place:
  // interleaved pairs (2i, 2i+1) rotated by positions[t]·inv_freq[i] and left interleaved; with
  // `inverse` the rotation by -angle (V4 undoes the values' rope on the attention output).
  virtual void Rope(const Tensor& x, std::int64_t offset, std::int64_t dim, std::span<const std::int32_t> positions,
                    const Tensor& inv_freq, bool inverse) = 0;

  // The pooled rows [len(windows), head_dim] of the windows the step closes, in order:
  // softmax over the window's slots, per channel, of gate + ape[slot], weighting kv (zeros for a
  // window -1). kv and gate [tokens, width] are the projections of every token of the step in
  // token order; a position before a window's first_new is read from `state` [state slots ·
  // state_positions, 2·width] (kv, then gate, of position p in entry slot · state_positions + p %
  // state_positions). An overlapping entry 0 has only its second half.
  virtual void Compress(const Tensor& kv, const Tensor& gate, const Tensor& ape, const Tensor& state,
                        std::span<const ClosedWindow> windows, const CompressorShape& shape, const Tensor& pooled) = 0;
  // Stores the projections of every token of the step with a slot (`slots` [tokens]: RingSlots at
  // keep = state_positions; -1 skips) into the state, for the windows later steps close.
  virtual void UpdateCompressorState(const Tensor& kv, const Tensor& gate, const Tensor& state,
                                     std::span<const std::int64_t> slots, const CompressorShape& shape) = 0;

  // Attention of q [n, heads, head_dim] (rope applied; this rank's rows, `queries` the rows that
  // are queries) over, per query at position p: the window keys (p - window, p] (rows of `kv`
  // [tokens, head_dim], the keys of every token of the step in token order, for the step's
  // positions; the sequence's ring `window_kv` [state slots · window, ...] at ring_base + pos %
  // window for earlier ones), and the visible compressed entries of `entries` (paged): all of
  // them, or with `selection` [n, k] (I32, -1 ends a row) the entries it lists. Ring and entries
  // are stored in shape.kv_format. Rows that are not queries are left as they are.
  // Keys are the values. p_s = softmax over the keys and the head's sink (sinks [heads]) of
  // softmax_scale · q·k_s; out [n, heads, head_dim] = Σ p_s k_s.
  virtual void Attention(const Tensor& q, const Tensor& kv, const Tensor& window_kv, const Tensor& entries,
                         const Tensor& selection, const Tensor& sinks, const V4Queries& queries,
                         const V4AttentionShape& shape, const Tensor& out) = 0;

  // kFp8 storage's rounding of rows [n, head_dim] in place: the nope values to their e4m3 code
  // times the block's ue8m0 scale (2^ceil(log2(max(amax, 1e-4) / 448))), the rope values to bf16.
  virtual void RoundToStorage(const Tensor& rows, std::int64_t rope_dim) = 0;
  // Stores rows [n, head_dim] (fp32) in entries `slots` of a window ring or an entries cache (a
  // slot of -1 skips its row): copied (kExact) or encoded (kFp8; exact for rounded rows).
  virtual void WriteEntries(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                            V4KvFormat format, std::int64_t rope_dim) = 0;

  // The grouped output projection: x [n, groups·k] in groups of k, w [groups·r, k] (group g's r
  // rows after group g-1's); out [n, groups·r], group g = x_g · w_gᵀ.
  virtual void GroupedLinear(const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out) = 0;

  // MoE routing with sqrt(softplus(logits)) scores. ids [n, top_k]: the top_k of scores + bias
  // (score-routed layers), or the hash table's row of each row's token (hash-routed layers:
  // `hash_table` [vocab, top_k] I32 of expert ids, checked at load, `token_ids` [n]; bias
  // unused) — either way in ascending expert order. weights [n, top_k] = score / Σ scores (+1e-20)
  // · scaling.
  virtual void RouteSqrtSoftplus(const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                                 std::span<const std::int32_t> token_ids, std::int64_t top_k, float scaling,
                                 const Tensor& ids, const Tensor& weights) = 0;
  // SwiGLU clamped at `limit`: gate_up [n, 2I] -> out [n, I] = silu(min(gate, limit)) ·
  // clamp(up, -limit, limit) (no clamp when limit is 0).
  virtual void ClampedSwiGlu(const Tensor& gate_up, float limit, const Tensor& out) = 0;
  // Backend::MoeExperts with each expert's activation clamped as ClampedSwiGlu does.
  virtual void MoeExperts(const Tensor& x, const Tensor& ids, const Tensor& weights,
                          std::span<const WeightView> gate_up, std::span<const WeightView> down, float limit,
                          const Tensor& out) = 0;
};

}  // namespace fission::kernels
