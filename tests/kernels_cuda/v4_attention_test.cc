// DeepSeek-V4's compressors, attention and storage formats on CUDA (cuda_v4.h) against the CPU
// reference (kernels::cpu::CpuV4Ops) on the same inputs.
//   Storage: RoundToStorage and WriteEntries (FP8 entries, exact fp32 and bf16 rows) bit for bit,
//     for the fixture's rows (32 values, rope 8: one partial block) and V4-Flash's (512, rope 64),
//     at several magnitudes, with a zero block, an amax on the scale's power-of-two boundary, e4m3
//     and bf16 ties, huge and tiny values, and a skipped slot.
//   Compressor: Compress with overlap (CSA, ratio 4) and without (HCA, ratio 16 and 128), windows
//     whose slots come partly from the state and partly from the step, an overlapping entry 0, and
//     several sequences whose windows come in a shuffled order; UpdateCompressorState for sequences
//     shorter and longer than the state, and a sequence without a state slot (skipped), exactly.
//   Attention: sliding-only (ratio 0), HCA (every visible entry) and CSA (a selection with -1
//     terminators and valid entries after them) layers over a chunked prefill whose earlier
//     positions are in the ring, decodes, a fresh prefill and a context-parallel share (queries on
//     every other token), in exact fp32 and bf16 caches and FP8 entries, head_dim 32 with rope 8 and
//     head_dim 512 with rope 64 (64 heads, window 128), head counts that leave partial groups, rows
//     whose keys are split (long decode rows) and a padding row that must stay unwritten. At
//     head_dim 512 over bf16 or FP8 storage the tensor-core kernel runs (64 heads a block: 16 and
//     80 heads leave partial groups), checked against the CPU given the same bf16 q and step keys.
// Bounds: storage and state copies are exact (the same bytes); fp32 attention and compress meet the
// CPU within 1e-5 relative L2 (they differ by summation order and exp's last bits; the kernels'
// code run on the host through a thread emulation met it within 1e-7 to 8e-7); the tensor-core
// kernel within kBf16Attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_v4.h"
#include "kernels/cuda/cuda_v4.h"
#include "kernels_cuda/cuda_testlib.h"
#include "tensor/dtype.h"

namespace fission::kernels::cuda::testing {
namespace {

constexpr double kF32Attention = 1e-5;
// The tensor-core kernel against the CPU on the same bf16 q and keys: its probabilities are
// rounded to bf16 before P·V (a relative 2^-9 at most each), the rest is fp32 summation order.
constexpr double kBf16Attention = 4e-3;

cpu::CpuV4Ops& CpuV4() {
  static cpu::CpuV4Ops ops;
  return ops;
}

CudaContext& Ctx() { return Gpu().context(); }

Buffer BytesToDevice(DType dtype, Shape shape, const void* bytes) {
  Buffer b(dtype, shape, Gpu().allocator());
  Gpu().CopyBytesFromHost(bytes, b);
  return b;
}

std::vector<std::uint8_t> BytesToHost(const Tensor& t) {
  std::vector<std::uint8_t> v(t.bytes());
  Gpu().CopyBytesToHost(t, v.data());
  return v;
}

// The index of the first differing byte, or -1.
std::int64_t FirstDifference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<std::int64_t>(i);
  return -1;
}

// ---- Storage ----------------------------------------------------------------------------------

const std::vector<std::pair<std::int64_t, std::int64_t>> kRowShapes = {{32, 8}, {512, 64}};  // (head_dim, rope)

// n rows of d values: magnitudes 10^(t-4) by row, a zero first block in row 2, an amax of exactly
// 448·2^-4 in row 3 (the scale's power-of-two boundary) with e4m3 ties (normal and subnormal),
// huge values in row 4 (3e4, -1e30), amax below 1e-4 in row 6, bf16 ties in the rope part of row 5.
std::vector<float> StorageRows(std::int64_t n, std::int64_t d, std::int64_t rope, std::mt19937& rng) {
  std::vector<float> rows = Random(n * d, rng);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t i = 0; i < d; ++i) rows[t * d + i] *= std::pow(10.0f, static_cast<float>(t - 4));
  const std::int64_t nope = d - rope;
  for (std::int64_t i = 0; i < std::min<std::int64_t>(64, nope); ++i) rows[2 * d + i] = 0.0f;
  // Scale 2^-4: ties between codes (normal and subnormal) and 3 subnormal quanta, which a scale
  // twice as large would round differently.
  const float ties[] = {28.0f, 1.0625f / 16, 1.1875f / 16, 3.0f / 1024 / 16, 3.0f / 8192, -1.0625f / 16};
  for (int i = 0; i < 6; ++i) rows[3 * d + i] = ties[i];
  rows[4 * d + 1] = 3e4f;
  rows[4 * d + 3] = -1e30f;
  for (std::int64_t i = 0; i < d; ++i) rows[6 * d + i] = 1e-7f * static_cast<float>(i % 7);
  rows[5 * d + nope] = 1.00390625f;  // 1 + 2^-8: a bf16 tie, to 1
  rows[5 * d + nope + 1] = -1.01171875f;  // 1 + 3·2^-8: a tie, away from 1
  return rows;
}

TEST(CudaV4Storage, RoundToStorageMatchesCpuBitForBit) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(401);
  for (auto [d, rope] : kRowShapes) {
    const std::int64_t n = 8;
    const std::vector<float> original = StorageRows(n, d, rope, rng);
    std::vector<float> ref = original;
    CpuV4().RoundToStorage(HostView(ref, Shape{n, d}), rope);
    ASSERT_FALSE(SameBits(ref, original)) << "the rows need rounding for the test to mean anything";
    Buffer rows = ToDevice(DType::kF32, Shape{n, d}, original);
    V4RoundToStorage(Ctx(), rows, rope);
    const std::vector<float> got = ToHost(rows);
    for (std::int64_t i = 0; i < n * d; ++i)
      ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(ref[i]))
          << "head_dim " << d << ": row " << i / d << " value " << i % d << " (" << original[i] << " -> " << got[i]
          << ", CPU " << ref[i] << ")";
  }
}

TEST(CudaV4Storage, WriteEntriesMatchesCpuBitForBit) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(402);
  const std::vector<std::int64_t> slots = {3, -1, 0, 7, 5, 1, 6, 2};
  const std::int64_t n = static_cast<std::int64_t>(slots.size()), entries = 8;
  for (auto [d, rope] : kRowShapes) {
    const std::vector<float> rows = StorageRows(n, d, rope, rng);  // not rounded: WriteEntries encodes any row
    std::vector<float> rows_host = rows;
    // FP8 entries: both caches start as the same 0xAB bytes (slot 4 is nobody's and stays so).
    const std::int64_t bytes = V4KvEntryBytes(d, rope);
    std::vector<std::uint8_t> ref(static_cast<std::size_t>(entries * bytes), 0xAB);
    CpuV4().WriteEntries(HostView(rows_host, Shape{n, d}), slots, HostTensor(ref.data(), DType::kU8, Shape{entries, bytes}),
                         V4KvFormat::kFp8, rope);
    Buffer cache = BytesToDevice(DType::kU8, Shape{entries, bytes}, std::vector<std::uint8_t>(ref.size(), 0xAB).data());
    Buffer device_rows = ToDevice(DType::kF32, Shape{n, d}, rows);
    V4WriteEntries(Ctx(), device_rows, slots, cache, V4KvFormat::kFp8, rope);
    const std::vector<std::uint8_t> got = BytesToHost(cache);
    const std::int64_t at = FirstDifference(got, ref);
    EXPECT_EQ(at, -1) << "FP8 entries of " << d << " values: byte " << at % bytes << " of entry " << at / bytes;
    EXPECT_EQ(got[4 * bytes], 0xAB) << "an entry no row goes to was written";

    // Exact rows: the fp32 values, or their bf16 rounding (F32ToBf16), in the cache's dtype.
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      const std::size_t row_bytes = DTypeBytes(dtype, d);
      std::vector<std::uint8_t> expect(entries * row_bytes, 0x5C);
      for (std::int64_t t = 0; t < n; ++t)
        if (slots[t] >= 0) ConvertFromF32(dtype, rows.data() + t * d, expect.data() + slots[t] * row_bytes, d);
      Buffer exact = BytesToDevice(dtype, Shape{entries, d}, std::vector<std::uint8_t>(expect.size(), 0x5C).data());
      V4WriteEntries(Ctx(), device_rows, slots, exact, V4KvFormat::kExact, rope);
      EXPECT_EQ(FirstDifference(BytesToHost(exact), expect), -1) << "exact " << DTypeName(dtype) << " rows of " << d;
    }
  }
}

// ---- Compressor -------------------------------------------------------------------------------

// A sequence of the step: `before` positions already seen (their projections kept in the state
// slot), then `fresh` new tokens.
struct CompressSeq {
  std::int32_t before, fresh, state_slot;
};

struct CompressProblem {
  CompressorShape sh;
  std::vector<SeqAttention> seqs;
  std::vector<ClosedWindow> windows;
  std::int64_t tokens = 0, state_rows = 0;
  std::vector<float> kv, gate, ape, state;

  CompressProblem(std::int64_t ratio, std::int64_t head_dim, bool overlap, const std::vector<CompressSeq>& specs,
                  std::mt19937& rng) {
    sh.ratio = ratio;
    sh.head_dim = head_dim;
    sh.overlap = overlap;
    std::int32_t slots = 0;
    for (const CompressSeq& c : specs) {
      SeqAttention s;
      s.query_start = s.token_start = static_cast<std::int32_t>(tokens);
      s.query_len = s.new_tokens = c.fresh;
      s.kv_len = c.before + c.fresh;
      s.state_slot = c.state_slot;
      s.decode = c.fresh == 1;
      slots = std::max(slots, c.state_slot + 1);
      // The windows this step closes: those ending in its new positions.
      for (std::int32_t w = 0; (w + 1) * ratio <= s.kv_len; ++w)
        if ((w + 1) * ratio > c.before) windows.push_back(ClosedWindowOf(s, w));
      windows.push_back(ClosedWindow{});  // a place the step plan keeps where no window closes
      seqs.push_back(s);
      tokens += c.fresh;
    }
    std::shuffle(windows.begin(), windows.end(), rng);
    const std::int64_t width = sh.width();
    state_rows = (slots + 1) * sh.state_positions();
    kv = Random(tokens * width, rng);
    gate = Random(tokens * width, rng, 2.0f);
    ape = Random(ratio * width, rng);
    state = Random(state_rows * 2 * width, rng);  // the previous steps' projections
  }
  std::int64_t count() const { return static_cast<std::int64_t>(windows.size()); }
};

void CheckCompress(std::int64_t ratio, std::int64_t head_dim, bool overlap, const std::vector<CompressSeq>& specs,
                   std::mt19937& rng) {
  CompressProblem p(ratio, head_dim, overlap, specs, rng);
  const std::int64_t w = p.sh.width(), d = head_dim;
  const std::string what = (overlap ? "CSA ratio " : "HCA ratio ") + std::to_string(ratio) + " head_dim " +
                           std::to_string(d);
  ASSERT_GT(p.count(), 0) << what;
  std::vector<float> ref(p.count() * d, 0.0f);
  CpuV4().Compress(HostView(p.kv, Shape{p.tokens, w}), HostView(p.gate, Shape{p.tokens, w}),
                   HostView(p.ape, Shape{ratio, w}), HostView(p.state, Shape{p.state_rows, 2 * w}), p.windows, p.sh,
                   HostView(ref, Shape{p.count(), d}));
  Buffer kv = ToDevice(DType::kF32, Shape{p.tokens, w}, p.kv), gate = ToDevice(DType::kF32, Shape{p.tokens, w}, p.gate);
  Buffer ape = ToDevice(DType::kF32, Shape{ratio, w}, p.ape);
  Buffer state = ToDevice(DType::kF32, Shape{p.state_rows, 2 * w}, p.state);
  Buffer pooled = Poisoned(DType::kF32, Shape{p.count(), d});
  V4Compress(Ctx(), kv, gate, ape, state, p.windows, p.sh, pooled);
  EXPECT_LT(RelErr(ToHost(pooled), ref), kF32Attention) << what;
}

// Per ratio: a chunked prefill whose first window closing now starts in the state (and, with
// overlap, whose previous window is all in the state), a fresh prefill (entry 0), a decode that
// closes a window from the state plus its one new token, a decode that closes none, and a fresh
// prefill without a state slot.
TEST(CudaV4Compressor, CompressMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(411);
  CheckCompress(4, 32, true, {{10, 14, 1}, {0, 9, 0}, {15, 1, 2}, {5, 1, 3}, {0, 4, -1}}, rng);
  CheckCompress(16, 32, false, {{10, 14, 1}, {0, 40, 0}, {31, 1, 2}, {20, 1, 3}, {0, 16, -1}}, rng);
  CheckCompress(4, 512, true, {{10, 14, 1}, {0, 9, 0}, {15, 1, 2}}, rng);    // V4-Flash CSA: width 1024
  CheckCompress(4, 128, true, {{30, 3, 0}, {0, 12, 1}}, rng);                // the CSA indexer's compressor
  CheckCompress(128, 512, false, {{255, 1, 0}, {100, 60, 1}, {0, 300, 2}}, rng);  // V4-Flash HCA
}

TEST(CudaV4Compressor, UpdateCompressorStateMatchesCpuExactly) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(412);
  // Longer than the state, shorter (from the middle of a window), a fresh short one, a decode, and
  // one without a slot.
  const std::vector<CompressSeq> specs = {{10, 14, 1}, {5, 3, 0}, {0, 2, 2}, {20, 1, 3}, {7, 5, -1}};
  for (auto [ratio, overlap] : {std::pair<std::int64_t, bool>{4, true}, {16, false}}) {
    CompressProblem p(ratio, 32, overlap, specs, rng);
    const std::int64_t w = p.sh.width();
    std::vector<float> ref = p.state;
    std::vector<std::int64_t> slots(static_cast<std::size_t>(p.tokens));
    RingSlots(p.seqs, p.sh.state_positions(), slots);
    CpuV4().UpdateCompressorState(HostView(p.kv, Shape{p.tokens, w}), HostView(p.gate, Shape{p.tokens, w}),
                                  HostView(ref, Shape{p.state_rows, 2 * w}), slots, p.sh);
    ASSERT_FALSE(SameBits(ref, p.state));
    Buffer kv = ToDevice(DType::kF32, Shape{p.tokens, w}, p.kv);
    Buffer gate = ToDevice(DType::kF32, Shape{p.tokens, w}, p.gate);
    Buffer state = ToDevice(DType::kF32, Shape{p.state_rows, 2 * w}, p.state);
    V4UpdateCompressorState(Ctx(), kv, gate, state, slots, p.sh);
    EXPECT_TRUE(SameBits(ToHost(state), ref)) << "ratio " << ratio;
  }
}

// ---- Attention --------------------------------------------------------------------------------

// A sequence of the step: `before` positions already cached, then `fresh` new tokens, of which
// every `stride`-th is a query of this rank; without `slot` it has no ring (a fresh prefill may).
struct AttnSeq {
  std::int32_t before, fresh;
  std::int32_t stride = 1;
  bool slot = true;
};

struct AttnCase {
  std::int64_t heads, head_dim, rope, window, ratio, page;
  std::int64_t topk;  // CSA's selection width (0: every visible entry)
  std::vector<AttnSeq> seqs;
};

// The format of the ring and the entries, and the dtype of exact rows.
struct Storage {
  V4KvFormat format;
  DType dtype;
};
const Storage kStorages[] = {{V4KvFormat::kExact, DType::kF32}, {V4KvFormat::kExact, DType::kBF16},
                             {V4KvFormat::kFp8, DType::kU8}};

std::string Describe(const AttnCase& c, const Storage& st) {
  return StrCat(st.format == V4KvFormat::kFp8 ? "fp8" : DTypeName(st.dtype), " heads=", c.heads, " head_dim=",
                c.head_dim, " window=", c.window, " ratio=", c.ratio, c.topk > 0 ? " topk=" : "",
                c.topk > 0 ? std::to_string(c.topk) : "");
}

// A cache of `rows` random rows of head_dim values stored as `st` says (host bytes).
std::vector<std::uint8_t> RandomCache(std::int64_t rows, std::int64_t d, std::int64_t rope, const Storage& st,
                                      std::mt19937& rng) {
  std::vector<float> values = Random(rows * d, rng);
  if (st.format == V4KvFormat::kExact) {
    std::vector<std::uint8_t> bytes(DTypeBytes(st.dtype, rows * d));
    ConvertFromF32(st.dtype, values.data(), bytes.data(), rows * d);
    return bytes;
  }
  const std::int64_t width = V4KvEntryBytes(d, rope);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(rows * width));
  std::vector<std::int64_t> slots(static_cast<std::size_t>(rows));
  std::iota(slots.begin(), slots.end(), 0);
  CpuV4().WriteEntries(HostView(values, Shape{rows, d}), slots, HostTensor(bytes.data(), DType::kU8, Shape{rows, width}),
                       V4KvFormat::kFp8, rope);
  return bytes;
}

struct AttnProblem {
  AttnCase c;
  Storage st;
  V4AttentionShape sh;
  std::int64_t n = 0, tokens = 0, ring_rows = 0, entry_rows = 0, width = 0;
  std::vector<std::vector<std::int32_t>> tables, positions;
  std::vector<std::int32_t> flat_tables;  // [sequences, table_width], as the step-input block holds them
  std::int64_t table_width = 1;
  std::vector<SeqAttention> seqs;
  std::vector<V4QueryRow> rows;
  std::vector<float> q, kv, sinks;
  std::vector<std::uint8_t> ring, entries;
  std::vector<std::int32_t> selection;

  AttnProblem(const AttnCase& ac, const Storage& storage, std::mt19937& rng) : c(ac), st(storage) {
    sh.heads = c.heads;
    sh.head_dim = c.head_dim;
    sh.window = c.window;
    sh.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    sh.page_size = c.page;
    sh.ratio = c.ratio;
    sh.kv_format = st.format;
    sh.rope_dim = c.rope;
    const std::int64_t d = c.head_dim, seq_count = static_cast<std::int64_t>(c.seqs.size());
    // Pages in a shuffled order from a pool with spare pages; ring slots in reverse order.
    std::int64_t pages = 3;
    for (const AttnSeq& s : c.seqs) pages += (s.before + s.fresh + c.page - 1) / c.page;
    std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::int64_t next = 0;
    for (const AttnSeq& s : c.seqs) {
      const std::int64_t np = (s.before + s.fresh + c.page - 1) / c.page;
      tables.emplace_back(order.begin() + next, order.begin() + next + np);
      next += np;
      std::vector<std::int32_t> pos;
      for (std::int32_t t = 0; t < s.fresh; t += s.stride) pos.push_back(s.before + t);
      positions.push_back(pos);
    }
    for (const auto& t : tables) table_width = std::max<std::int64_t>(table_width, static_cast<std::int64_t>(t.size()));
    flat_tables.assign(static_cast<std::size_t>(seq_count * table_width), 0);
    for (std::size_t i = 0; i < tables.size(); ++i)
      std::copy(tables[i].begin(), tables[i].end(), flat_tables.begin() + static_cast<std::int64_t>(i) * table_width);
    for (std::size_t i = 0; i < c.seqs.size(); ++i) {
      const AttnSeq& a = c.seqs[i];
      SeqAttention s;
      s.query_start = static_cast<std::int32_t>(n);
      s.query_len = static_cast<std::int32_t>(positions[i].size());
      s.kv_len = a.before + a.fresh;
      s.query_positions = positions[i];
      s.block_table = std::span<const std::int32_t>(flat_tables).subspan(i * table_width, table_width);
      s.decode = a.fresh == 1;
      s.state_slot = a.slot ? static_cast<std::int32_t>(seq_count - 1 - static_cast<std::int64_t>(i)) : -1;
      s.token_start = static_cast<std::int32_t>(tokens);
      s.new_tokens = a.fresh;
      seqs.push_back(s);
      n += s.query_len;
      tokens += a.fresh;
    }
    rows.resize(static_cast<std::size_t>(n));
    QueryRowsOf(seqs, flat_tables, table_width, c.window, rows);
    n += 1;  // a padding row, outside every sequence
    width = st.format == V4KvFormat::kFp8 ? V4KvEntryBytes(d, c.rope) : d;
    ring_rows = (seq_count + 1) * c.window;
    entry_rows = c.ratio > 0 ? pages * std::max<std::int64_t>(1, c.page / c.ratio) : 1;
    ring = RandomCache(ring_rows, d, c.rope, st, rng);
    entries = RandomCache(entry_rows, d, c.rope, st, rng);
    q = Random(n * c.heads * d, rng, 2.0f);  // peaked enough that a wrong key shows
    kv = Random(tokens * d, rng);
    sinks = Random(c.heads, rng);
    if (c.topk > 0) Select(rng);
  }

  // Each row's selection: distinct visible entries in a random order, min(topk, visible) of them;
  // every third row ends early at a -1 followed by valid entries, which must not count.
  void Select(std::mt19937& rng) {
    selection.assign(static_cast<std::size_t>(n * c.topk), -1);
    int count = 0;
    for (const SeqAttention& s : seqs)
      for (std::int32_t t = 0; t < s.query_len; ++t) {
        const std::int32_t visible = (s.query_positions[t] + 1) / static_cast<std::int32_t>(c.ratio);
        std::vector<std::int32_t> all(static_cast<std::size_t>(visible));
        std::iota(all.begin(), all.end(), 0);
        std::shuffle(all.begin(), all.end(), rng);
        std::int32_t take = static_cast<std::int32_t>(std::min<std::int64_t>(c.topk, visible));
        std::int32_t* row = selection.data() + (s.query_start + t) * c.topk;
        std::copy(all.begin(), all.begin() + take, row);
        if (++count % 3 == 0 && take >= 2) {
          row[take / 2] = -1;
          if (take / 2 + 1 < c.topk && take < visible) row[take / 2 + 1] = all[take];
        }
      }
  }

  Shape qshape() const { return Shape{n, c.heads, c.head_dim}; }
  // Every sequence a decode: the splits follow from the shape (as in a captured step).
  V4Queries queries() const {
    const bool decode = std::all_of(c.seqs.begin(), c.seqs.end(), [](const AttnSeq& a) { return a.fresh == 1; });
    return {rows, flat_tables, table_width, decode};
  }
  DType cache_dtype() const { return st.format == V4KvFormat::kFp8 ? DType::kU8 : st.dtype; }

  std::vector<float> RunCpu() {
    std::vector<float> out(static_cast<std::size_t>(n * c.heads * c.head_dim), 0.0f);
    Tensor sel;  // empty: every visible entry
    if (c.topk > 0) sel = HostTensor(selection.data(), DType::kI32, Shape{n, c.topk});
    CpuV4().Attention(HostView(q, qshape()), HostView(kv, Shape{tokens, c.head_dim}),
                      HostTensor(ring.data(), cache_dtype(), Shape{ring_rows, width}),
                      HostTensor(entries.data(), cache_dtype(), Shape{entry_rows, width}), sel,
                      HostView(sinks, Shape{c.heads}), queries(), sh, HostView(out, qshape()));
    return out;
  }

  std::vector<float> RunGpu() const;

  // The rows that belong to sequences (all but the last).
  std::vector<float> Owned(const std::vector<float>& all) const {
    return {all.begin(), all.end() - c.heads * c.head_dim};
  }
};

// Whether the layer takes the tensor-core kernel (v4_flash.cu): head_dim 512 over a ring and
// entries stored as bf16 or FP8.
bool TakesTensorCores(const AttnCase& c, const Storage& st) {
  return c.head_dim == 512 && !(st.format == V4KvFormat::kExact && st.dtype == DType::kF32);
}

// A problem's inputs on the device, the output poisoned.
struct DeviceAttn {
  Buffer q, kv, ring, entries, sinks, sel, out;
  explicit DeviceAttn(const AttnProblem& p)
      : q(ToDevice(DType::kF32, p.qshape(), p.q)),
        kv(ToDevice(DType::kF32, Shape{p.tokens, p.c.head_dim}, p.kv)),
        ring(BytesToDevice(p.cache_dtype(), Shape{p.ring_rows, p.width}, p.ring.data())),
        entries(BytesToDevice(p.cache_dtype(), Shape{p.entry_rows, p.width}, p.entries.data())),
        sinks(ToDevice(DType::kF32, Shape{p.c.heads}, p.sinks)),
        out(Poisoned(DType::kF32, p.qshape())) {
    if (p.c.topk > 0) sel = BytesToDevice(DType::kI32, Shape{p.n, p.c.topk}, p.selection.data());
  }
  void Run(const AttnProblem& p) { Run(p, p.queries()); }
  void Run(const AttnProblem& p, const V4Queries& queries) {
    V4Attention(Ctx(), q, kv, ring, entries, sel.tensor(), sinks, queries, p.sh, out);
  }
};

std::vector<float> AttnProblem::RunGpu() const {
  DeviceAttn d(*this);
  d.Run(*this);
  return ToHost(d.out);
}

void CheckAttention(const AttnCase& c, std::mt19937& rng) {
  for (const Storage& st : kStorages) {
    AttnProblem p(c, st, rng);
    const bool tensor_cores = TakesTensorCores(c, st);
    if (tensor_cores) {  // the CPU sees the bf16 q and step keys the tensor cores take
      p.q = RoundBf16(p.q);
      p.kv = RoundBf16(p.kv);
    }
    const std::vector<float> ref = p.RunCpu(), got = p.RunGpu();
    EXPECT_LT(RelErr(p.Owned(got), p.Owned(ref)), tensor_cores ? kBf16Attention : kF32Attention) << Describe(c, st);
    EXPECT_TRUE(std::isnan(got[(p.n - 1) * c.heads * c.head_dim])) << Describe(c, st) << ": the padding row was written";
  }
}

// A chunked prefill whose window reaches into the ring, a decode, fresh prefills (one without a
// ring slot), a context-parallel share of a chunk (queries on every other token).
TEST(CudaV4Attention, SlidingWindowMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(421);
  CheckAttention({4, 32, 8, 8, 0, 16, 0, {{13, 6}, {40, 1}, {0, 11}, {20, 9, 2}, {0, 5, 1, false}}}, rng);
  CheckAttention({64, 512, 64, 128, 0, 64, 0, {{300, 5}, {1000, 1}, {0, 130}}}, rng);  // V4-Flash
  CheckAttention({64, 512, 64, 128, 0, 64, 0, {{300, 1}, {5, 1}, {0, 1}}}, rng);       // a decode step
  CheckAttention({16, 512, 64, 128, 0, 64, 0, {{200, 70}, {0, 1}}}, rng);  // V4-Flash at TP 4: a partial group
}

// Every visible entry (HCA): three heads (a partial warp), a long decode whose keys are split.
TEST(CudaV4Attention, AllEntriesMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(422);
  CheckAttention({3, 32, 8, 8, 16, 16, 0, {{50, 7}, {100, 1}, {0, 40}, {60, 9, 2}}}, rng);
  CheckAttention({3, 32, 8, 8, 16, 16, 0, {{2000, 1}}}, rng);  // alone: split
  CheckAttention({64, 512, 64, 128, 128, 64, 0, {{20000, 1}, {1000, 20}, {0, 150}}}, rng);  // V4-Flash
  CheckAttention({64, 512, 64, 128, 128, 64, 0, {{20000, 1}, {9000, 1}}}, rng);
  CheckAttention({64, 512, 64, 128, 128, 64, 0, {{100, 1}, {200, 1}, {3, 1}}}, rng);  // short decodes, many empty splits
}

// The indexer's selection (CSA), ended by -1: 20 heads (a full group of 16 and a partial one).
TEST(CudaV4Attention, SelectedEntriesMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(423);
  CheckAttention({20, 32, 8, 8, 4, 16, 8, {{30, 6}, {64, 1}, {0, 20}, {400, 1}, {41, 7, 2}}}, rng);
  CheckAttention({64, 512, 64, 128, 4, 64, 512, {{3000, 1}, {300, 24}, {0, 40}}}, rng);  // V4-Flash
  CheckAttention({64, 512, 64, 128, 4, 64, 512, {{5000, 1}}}, rng);
  CheckAttention({80, 512, 64, 128, 4, 256, 512, {{2500, 3}, {600, 1}, {0, 300}}}, rng);  // a full and a partial group
}

// A captured decode step of the tensor-core kernel (its splits from the shape; the query rows and
// tables in one input block, as a step's) replays new queries bit for bit as an eager call
// computes them.
TEST(CudaV4Attention, TensorCoreDecodeReplaysBitForBit) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(424);
  for (std::int64_t ratio : {4, 128}) {
    const AttnCase c{64, 512, 64, 128, ratio, 64, ratio == 4 ? 512 : 0, {{3000, 1}, {700, 1}, {20, 1}}};
    AttnProblem p(c, kStorages[1], rng);
    ASSERT_TRUE(TakesTensorCores(c, p.st));
    p.kv = RoundBf16(p.kv);
    static_assert(sizeof(V4QueryRow) % sizeof(std::int32_t) == 0);
    const std::size_t row_ints = p.rows.size() * sizeof(V4QueryRow) / sizeof(std::int32_t);
    std::vector<std::int32_t> block(row_ints + p.flat_tables.size());
    std::memcpy(block.data(), p.rows.data(), p.rows.size() * sizeof(V4QueryRow));
    std::copy(p.flat_tables.begin(), p.flat_tables.end(), block.begin() + static_cast<std::ptrdiff_t>(row_ints));
    const V4Queries queries{{reinterpret_cast<const V4QueryRow*>(block.data()), p.rows.size()},
                            {block.data() + row_ints, p.flat_tables.size()}, p.table_width, true};
    Buffer device_block(DType::kI32, Shape{static_cast<std::int64_t>(block.size())}, Gpu().allocator());
    Gpu().CopyBytesFromHost(block.data(), device_block);
    const InputMirror mirror{reinterpret_cast<const char*>(block.data()), static_cast<char*>(device_block.tensor().data),
                             block.size() * sizeof(std::int32_t)};
    MirrorScope scope(Ctx(), mirror);
    DeviceAttn d(p);
    d.Run(p, queries);
    CapturedGraph graph(Ctx(), [&] { d.Run(p, queries); }, mirror);
    p.q = RoundBf16(Random(p.n * c.heads * c.head_dim, rng, 2.0f));
    Gpu().CopyBytesFromHost(p.q.data(), d.q);
    graph.Launch();
    const std::vector<float> replayed = ToHost(d.out);
    EXPECT_LT(RelErr(p.Owned(replayed), p.Owned(p.RunCpu())), kBf16Attention) << "ratio " << ratio;
    d.Run(p, queries);
    EXPECT_TRUE(SameBits(ToHost(d.out), replayed)) << "ratio " << ratio << ": replay and eager call differ";
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
