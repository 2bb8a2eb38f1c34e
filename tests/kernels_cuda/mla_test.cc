// MLA attention, both forms, over a paged latent cache with ragged batches: CUDA against the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels_cuda/cuda_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

// A sequence's new tokens follow context_len cached ones; with stride > 1 the step holds only every
// stride-th of them (a context-parallel rank's share), so query positions are not consecutive.
struct SeqSpec {
  int context_len, query_len;
  int stride = 1;
};

// A batch: a cache of random latent rows, random pages per sequence, queries and kv_b.
struct Batch {
  MlaShape shape;
  std::int64_t n = 0, pages = 0;
  std::vector<float> q, cache, kv_b;
  std::vector<std::vector<std::int32_t>> tables, positions;
  std::vector<SeqAttention> seqs;

  static int KvLen(const SeqSpec& s) { return s.context_len + (s.query_len - 1) * s.stride + 1; }

  Batch(const std::vector<SeqSpec>& specs, std::int64_t heads, std::int64_t page_size, bool bf16, std::mt19937& rng) {
    shape = {heads, 128, 64, 128, 512, 1.0f / std::sqrt(192.0f), page_size};
    std::int64_t need = 0;
    for (const SeqSpec& s : specs) {
      n += s.query_len;
      need += (KvLen(s) + page_size - 1) / page_size;
    }
    pages = need + 3;  // spare pages that no sequence owns
    std::vector<std::int32_t> order(pages);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::int64_t next = 0, start = 0;
    for (const SeqSpec& s : specs) {
      const std::int64_t np = (KvLen(s) + page_size - 1) / page_size;
      tables.emplace_back(order.begin() + next, order.begin() + next + np);
      next += np;
      std::vector<std::int32_t> pos(s.query_len);
      for (int t = 0; t < s.query_len; ++t) pos[t] = s.context_len + t * s.stride;
      positions.push_back(pos);
      seqs.push_back({static_cast<std::int32_t>(start), s.query_len, KvLen(s), {}, {}});
      start += s.query_len;
    }
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      seqs[i].block_table = tables[i];
      seqs[i].query_positions = positions[i];
    }
    q = Random(n * heads * 192, rng);
    cache = Random(pages * page_size * 576, rng);
    kv_b = Random(heads * 256 * 512, rng, 0.05f);
    if (bf16) {
      q = RoundBf16(q);
      cache = RoundBf16(cache);
      kv_b = RoundBf16(kv_b);
    }
  }

  // The layout of a graph's input block: all query positions, then every block table padded to
  // the longest with page 0, one array, each sequence's part at a fixed stride.
  std::vector<std::int32_t> block;
  std::int64_t table_width = 0;
  void MakeContiguous() {
    for (const auto& t : tables) table_width = std::max<std::int64_t>(table_width, t.size());
    const std::size_t count = seqs.size();
    block.assign(n + count * table_width, 0);
    std::int64_t at = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::copy(positions[i].begin(), positions[i].end(), block.begin() + at);
      seqs[i].query_positions = std::span<const std::int32_t>(block.data() + at, positions[i].size());
      at += static_cast<std::int64_t>(positions[i].size());
    }
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t* table = block.data() + n + i * table_width;
      std::copy(tables[i].begin(), tables[i].end(), table);
      seqs[i].block_table = std::span<const std::int32_t>(table, table_width);
    }
  }
  // Each decoding sequence one token further (its table already reaches it: tests leave room).
  void Advance() {
    for (SeqAttention& s : seqs) {
      ++s.kv_len;
      ++block[s.query_positions.data() - block.data()];
    }
  }
};

enum class Form { kExpanded, kAbsorbed };

void RunCpu(Batch& b, Form form, std::span<const SeqAttention> seqs, std::vector<float>& out) {
  const std::int64_t h = b.shape.num_heads;
  Tensor q = HostView(b.q, Shape{b.n, h, 192}), cache = HostView(b.cache, Shape{b.pages * b.shape.page_size, 576}),
         kv_b = HostView(b.kv_b, Shape{h * 256, 512}), o = HostView(out, Shape{b.n, h, 128});
  if (form == Form::kExpanded)
    Cpu().mla().Expanded(q, cache, kv_b, seqs, b.shape, o);
  else
    Cpu().mla().Absorbed(q, cache, kv_b, seqs, b.shape, o);
}

enum class Layout { kSeparate, kContiguous };

void Check(const std::vector<SeqSpec>& specs, std::int64_t heads, std::int64_t page_size, DType dtype, Form form,
           std::mt19937& rng, Layout layout = Layout::kSeparate) {
  Batch b(specs, heads, page_size, dtype == DType::kBF16, rng);
  if (layout == Layout::kContiguous) b.MakeContiguous();
  std::vector<float> ref(b.n * heads * 128);
  RunCpu(b, form, b.seqs, ref);
  Buffer q = ToDevice(dtype, Shape{b.n, heads, 192}, b.q),
         cache = ToDevice(dtype, Shape{b.pages * page_size, 576}, b.cache),
         kv_b = ToDevice(dtype, Shape{heads * 256, 512}, b.kv_b), out = Poisoned(DType::kF32, Shape{b.n, heads, 128});
  if (form == Form::kExpanded)
    Gpu().mla().Expanded(q, cache, kv_b, b.seqs, b.shape, out);
  else
    Gpu().mla().Absorbed(q, cache, kv_b, b.seqs, b.shape, out);
  EXPECT_LT(RelErr(ToHost(out), ref), kAttention)
      << (form == Form::kExpanded ? "expanded" : "absorbed") << " " << DTypeName(dtype) << " heads=" << heads
      << " page=" << page_size << " seqs=" << specs.size()
      << (layout == Layout::kContiguous ? " contiguous" : " separate");
}

// Both expanded-form kernels: the default (register softmax) and FISSION_MLA_PREFILL=generic.
TEST(CudaMla, ExpandedRaggedPrefillWithCachedPrefix) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(30);
  const std::vector<SeqSpec> ragged = {{0, 70}, {100, 5}, {3, 130}, {0, 1}, {64, 64}, {300, 200}};
  for (const char* kernel : {"default", "generic"}) {
    SCOPED_TRACE(kernel);
    setenv("FISSION_MLA_PREFILL", kernel, 1);
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Check(ragged, 4, 16, dtype, Form::kExpanded, rng);
      Check(ragged, 16, 64, dtype, Form::kExpanded, rng);
    }
    Check({{0, 1000}}, 2, 32, DType::kBF16, Form::kExpanded, rng);  // one long prompt, many row tiles
  }
  unsetenv("FISSION_MLA_PREFILL");
}

TEST(CudaMla, AbsorbedDecodeWithSplitKeys) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(31);
  // Long and short contexts in one batch (the long one is split over keys, the short ones have empty
  // splits), plus a sequence with three new tokens (causal within the step).
  const std::vector<SeqSpec> decode = {{0, 1}, {199, 1}, {1499, 1}, {4999, 1}};
  std::vector<SeqSpec> with_chunk = decode;
  with_chunk.push_back({37, 3});
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    Check(decode, 16, 16, dtype, Form::kAbsorbed, rng);      // 16-row blocks
    Check(with_chunk, 16, 16, dtype, Form::kAbsorbed, rng);  // 64-row blocks
  }
  Check(decode, 8, 32, DType::kBF16, Form::kAbsorbed, rng);  // half-empty 16-row blocks
  Check(with_chunk, 128, 64, DType::kBF16, Form::kAbsorbed, rng);
  // Many short sequences: enough blocks without splitting.
  std::vector<SeqSpec> many(40, SeqSpec{100, 1});
  Check(many, 128, 16, DType::kBF16, Form::kAbsorbed, rng);
}

// Pure decode (one query per sequence at row i, its own position the last key): the work list is
// built on the device from the positions, the splits from the batch size and heads alone, so short
// contexts leave most splits empty. Tables and positions either in one strided array (uploaded as
// one span) or in separate vectors (concatenated on the host).
TEST(CudaMla, AbsorbedPureDecodeBuildsItsWorkOnTheDevice) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(35);
  const std::vector<SeqSpec> mixed = {{0, 1}, {16, 1}, {299, 1}, {4999, 1}};
  for (Layout layout : {Layout::kSeparate, Layout::kContiguous}) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Check(mixed, 16, 16, dtype, Form::kAbsorbed, rng, layout);   // 16-row blocks, many empty splits
      Check(mixed, 128, 64, dtype, Form::kAbsorbed, rng, layout);  // 64-row blocks
    }
    Check({{4999, 1}}, 16, 16, DType::kBF16, Form::kAbsorbed, rng, layout);  // one sequence: the most splits
    Check({{0, 1}}, 128, 16, DType::kBF16, Form::kAbsorbed, rng, layout);    // one key
    std::vector<SeqSpec> many;
    for (int i = 0; i < 40; ++i) many.push_back({i % 10 == 0 ? 4999 : 13 * i, 1});
    Check(many, 128, 16, DType::kBF16, Form::kAbsorbed, rng, layout);  // few splits, a full grid
  }
}

// Verify runs of speculative decoding: every sequence has T = 4 queries ending at its last key, so
// the work list is built on the device as for a pure decode. Contexts on both sides of a split
// boundary (128 keys), alone and with the padding sequences a captured step adds (4 queries at
// positions 0..3), which change the split count of the others.
TEST(CudaMla, AbsorbedVerifyRunsBuildTheirWorkOnTheDevice) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(37);
  const std::vector<SeqSpec> runs = {{5, 4}, {36, 4}, {66, 4}, {126, 4}, {129, 4}};
  std::vector<SeqSpec> padded = runs;
  padded.insert(padded.end(), 3, SeqSpec{0, 4});
  for (const std::vector<SeqSpec>& specs : {runs, padded})
    for (std::int64_t heads : {16, 128}) {
      Check(specs, heads, 16, DType::kBF16, Form::kAbsorbed, rng, Layout::kContiguous);
      Check(specs, heads, 16, DType::kBF16, Form::kAbsorbed, rng, Layout::kSeparate);
    }
}

// The decode path captured once, reading positions and tables from an input block: outside the
// block the capture fails; inside it, the replay after every sequence grew by a token equals the
// CPU and, bit for bit, an eager call on the same inputs.
TEST(CudaMla, AbsorbedPureDecodeCapturedReplaysNextPositions) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(36);
  CudaContext& ctx = Gpu().context();
  const std::int64_t heads = 16, page = 16;
  // kv_len 16 and 32 fill their last page; the next token lands on the padding page 0.
  Batch b({{0, 1}, {15, 1}, {31, 1}, {299, 1}, {4999, 1}}, heads, page, true, rng);
  b.MakeContiguous();
  Buffer q = ToDevice(DType::kBF16, Shape{b.n, heads, 192}, b.q),
         cache = ToDevice(DType::kBF16, Shape{b.pages * page, 576}, b.cache),
         kv_b = ToDevice(DType::kBF16, Shape{heads * 256, 512}, b.kv_b),
         out = Poisoned(DType::kF32, Shape{b.n, heads, 128});
  auto run = [&] { Gpu().mla().Absorbed(q, cache, kv_b, b.seqs, b.shape, out); };
  auto reference = [&] {
    std::vector<float> ref(b.n * heads * 128);
    RunCpu(b, Form::kAbsorbed, b.seqs, ref);
    return ref;
  };
  run();  // eager: kernel attributes and GEMM heuristics
  EXPECT_LT(RelErr(ToHost(out), reference()), kAttention);

  ctx.BeginCapture({});
  EXPECT_THROW(run(), Error) << "positions from outside an input block were captured";
  ctx.AbortCapture();

  const std::size_t bytes = b.block.size() * sizeof(std::int32_t);
  Buffer device_block(DType::kI32, Shape{static_cast<std::int64_t>(b.block.size())}, Gpu().allocator());
  Gpu().CopyBytesFromHost(b.block.data(), device_block);
  const InputMirror block{reinterpret_cast<const char*>(b.block.data()), static_cast<char*>(device_block.tensor().data),
                          bytes};
  MirrorScope mirror(ctx, block);
  CapturedGraph graph(ctx, run, block);
  EXPECT_FALSE(graph.uploaded_constants()) << "the decode path uploaded constants";

  b.Advance();
  Gpu().CopyBytesFromHost(b.block.data(), device_block);
  graph.Launch();
  const std::vector<float> replayed = ToHost(out);
  EXPECT_LT(RelErr(replayed, reference()), kAttention);
  run();
  EXPECT_TRUE(SameBits(ToHost(out), replayed)) << "replay and eager call differ";
}

TEST(CudaMla, BothFormsAgreeOnPrefill) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(32);
  Check({{10, 40}, {0, 9}}, 8, 16, DType::kBF16, Form::kAbsorbed, rng);  // absorbed over prefill chunks too
}

// Context parallelism: each rank attends every C-th query of a prompt against all of its keys.
TEST(CudaMla, NonConsecutiveQueryPositions) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(34);
  const std::vector<SeqSpec> strided = {{0, 100, 2}, {37, 45, 4}, {0, 1, 3}, {500, 3, 2}};
  for (const char* kernel : {"default", "generic"}) {
    SCOPED_TRACE(kernel);
    setenv("FISSION_MLA_PREFILL", kernel, 1);
    Check(strided, 8, 16, DType::kBF16, Form::kExpanded, rng);
  }
  unsetenv("FISSION_MLA_PREFILL");
  Check(strided, 16, 16, DType::kBF16, Form::kAbsorbed, rng);
  Check({{0, 1, 1}, {1000, 1, 1}, {33, 2, 5}}, 16, 16, DType::kBF16, Form::kAbsorbed, rng);
}

// The model runs the expanded form for prefill sequences and the absorbed form for decodes on one
// output: each must write its own sequences' rows and leave the others alone.
TEST(CudaMla, MixedStepWritesOnlyOwnRows) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(33);
  Batch b({{0, 33}, {500, 1}, {20, 7}, {80, 1}}, 16, 16, true, rng);
  const std::int64_t heads = 16;
  std::vector<SeqAttention> prefill = {b.seqs[0], b.seqs[2]}, decode = {b.seqs[1], b.seqs[3]};
  std::vector<float> ref(b.n * heads * 128);
  RunCpu(b, Form::kExpanded, prefill, ref);
  RunCpu(b, Form::kAbsorbed, decode, ref);
  Buffer q = ToDevice(DType::kBF16, Shape{b.n, heads, 192}, b.q),
         cache = ToDevice(DType::kBF16, Shape{b.pages * 16, 576}, b.cache),
         kv_b = ToDevice(DType::kBF16, Shape{heads * 256, 512}, b.kv_b),
         out = Poisoned(DType::kBF16, Shape{b.n, heads, 128});
  Gpu().mla().Absorbed(q, cache, kv_b, decode, b.shape, out);
  // Before the expanded form runs, the prefill rows must still hold the poison.
  std::vector<float> mid = ToHost(out);
  for (const SeqAttention& s : prefill)
    for (std::int64_t i = s.query_start * heads * 128; i < (s.query_start + s.query_len) * heads * 128; ++i)
      ASSERT_TRUE(std::isnan(mid[i])) << "absorbed form wrote row element " << i;
  Gpu().mla().Expanded(q, cache, kv_b, prefill, b.shape, out);
  EXPECT_LT(RelErr(ToHost(out), ref), kAttention);
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
