// DeepSeek Sparse Attention's indexer on CUDA against the CPU reference: LayerNorm (the indexer's
// key norm), the index key cache in both formats, and IndexerTopK over paged, shuffled caches with
// several sequences, prefill and decode rows, rows that see fewer and more keys than topk, rows
// outside every sequence (left as they are), both kernels (FP8 tensor cores; fp32 for exact caches
// and other shapes), and a captured decode step; all of it for keys of one token (DSA) and for
// DeepSeek-V4's CSA entries of 4 positions (IndexCase::per), at V4's shapes.
//
// How selections are compared. With random inputs the device sums in another order than the CPU,
// so two scores closer than the rounding may swap: a row passes when its positions are distinct and
// visible, and, scored in double precision from the values both backends see (q codes and scales,
// the cache's codes and scales), its selection's scores sorted from the highest equal the CPU
// selection's within tol = 1e-4 × the row's largest Σ_h |coef_h · ReLU(q_h · k)| (fp32 sums of 128
// products and 64 heads stay near 1e-6 of that; the bound leaves room, and is still a hundred
// times finer than the gap between neighbouring scores of these rows), and its order is
// descending within tol. With integer inputs (values, weights and scales chosen so that every
// product and sum is exact in fp32, in both formats) the scores are equal to the bit on both
// backends, ties are everywhere, and the selection must equal the CPU's exactly: ties in position
// order. All-equal keys put more than 4096 equal scores at the k-th (the selection's tie path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>
#include <utility>

#include "kernels/cpu/cpu_ops.h"
#include "kernels_cuda/cuda_testlib.h"
#include "kernels_cuda/dsa_testlib.h"

namespace fission::kernels::cuda::testing {
namespace {

TEST(CudaDsa, LayerNormMatchesCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(61);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (std::int64_t d : {128, 7168, 37}) {
      const std::int64_t n = 9;
      std::vector<float> x = Random(n * d, rng, 3.0f), w = Random(d, rng), b = Random(d, rng);
      for (float& v : x) v += 1.5f;  // a mean away from zero
      if (dtype == DType::kBF16) x = RoundBf16(x);
      std::vector<float> ref(n * d);
      Cpu().LayerNorm(HostView(x, Shape{n, d}), HostView(w, Shape{d}), HostView(b, Shape{d}), 1e-6f,
                      HostView(ref, Shape{n, d}));
      Buffer dx = ToDevice(dtype, Shape{n, d}, x), dw = ToDevice(DType::kF32, Shape{d}, w),
             db = ToDevice(DType::kF32, Shape{d}, b), out = Poisoned(dtype, Shape{n, d});
      Gpu().LayerNorm(dx, dw, db, 1e-6f, out);
      // fp32: the same two-pass arithmetic in fp32 sums against the CPU's double sums; bf16: the
      // output's rounding.
      EXPECT_LT(RelErr(ToHost(out), ref), dtype == DType::kF32 ? 1e-5 : kBf16) << DTypeName(dtype) << " d=" << d;
      Gpu().LayerNorm(dx, dw, db, 1e-6f, dx);  // in place
      EXPECT_LT(RelErr(ToHost(dx), ref), dtype == DType::kF32 ? 1e-5 : kBf16) << "in place";
    }
  }
}

// The fp8 cache holds exactly the CPU's bytes (codes and scale), a slot of -1 writes nothing; an
// exact cache holds the keys (bf16: rounded). Keys of one token and entries of 4 (DeepSeek-V4's
// CSA: a slot is a row either way).
TEST(CudaDsa, WriteIndexKeysMatchesCpuBytes) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(62);
  using PerDim = std::pair<std::int64_t, std::int64_t>;
  for (const auto& [per, dim] : {PerDim{1, 128}, PerDim{1, 40}, PerDim{4, 128}, PerDim{4, 40}}) {
    const std::int64_t slots = 50, n = 12;
    std::vector<float> keys = Random(n * dim, rng, 2.0f);
    for (std::int64_t d = 0; d < dim; ++d) keys[3 * dim + d] = 0.0f;  // amax 0: the 1e-4 floor
    keys[5 * dim + 1] = 1e6f;                                         // one huge value
    std::vector<std::int64_t> where = {3, 17, -1, 0, 49, 8, 9, 10, -1, 33, 34, 21};
    IndexerShape sh{4, dim, 8, 1.0f, 16, IndexKeyFormat::kFp8, per};
    const std::int64_t width = dim + 4;
    std::vector<std::uint8_t> cpu_cache(slots * width, 0), gpu_bytes(slots * width);
    cpu::WriteIndexKeys(HostView(keys, Shape{n, dim}), where, HostTensor(cpu_cache.data(), DType::kU8, Shape{slots, width}),
                        sh);
    Buffer cache(DType::kU8, Shape{slots, width}, Gpu().allocator());
    Gpu().Zero(cache);
    Buffer dkeys = ToDevice(DType::kF32, Shape{n, dim}, keys);
    Gpu().dsa().WriteIndexKeys(dkeys, where, cache, sh);
    Gpu().CopyBytesToHost(cache, gpu_bytes.data());
    EXPECT_EQ(std::memcmp(cpu_cache.data(), gpu_bytes.data(), gpu_bytes.size()), 0)
        << "fp8 cache bytes, dim " << dim << ", per " << per;

    sh.key_format = IndexKeyFormat::kExact;
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Buffer exact = Poisoned(dtype, Shape{slots, dim});
      Gpu().dsa().WriteIndexKeys(dkeys, where, exact, sh);
      const std::vector<float> got = ToHost(exact), want = dtype == DType::kBF16 ? RoundBf16(keys) : keys;
      for (std::int64_t i = 0; i < n; ++i) {
        if (where[i] < 0) continue;
        for (std::int64_t d = 0; d < dim; ++d)
          ASSERT_EQ(got[where[i] * dim + d], want[i * dim + d]) << DTypeName(dtype) << " row " << i;
      }
      EXPECT_TRUE(std::isnan(got[1 * dim])) << "an unwritten slot changed";
    }
  }
}

enum class Data { kRandom, kIntegers, kEqualKeys };

struct IndexCase {
  std::vector<DsaSeqSpec> specs;
  std::int64_t heads, dim, page, topk;
  IndexKeyFormat format;
  DType cache_dtype;  // exact caches: fp32 or bf16 (fp8: U8)
  Data data = Data::kRandom;
  std::int64_t per = 1;  // tokens_per_entry: 4 for DeepSeek-V4's CSA entries
};

std::string Describe(const IndexCase& c) {
  return StrCat(c.format == IndexKeyFormat::kFp8 ? "fp8" : DTypeName(c.cache_dtype), " heads=", c.heads, " dim=",
                c.dim, " page=", c.page, " topk=", c.topk, " per=", c.per,
                c.data == Data::kIntegers ? " integers" : c.data == Data::kEqualKeys ? " equal keys" : " random");
}

// Keys a query at `position` sees (entries of c.per positions).
int VisibleOf(const IndexCase& c, std::int32_t position) { return static_cast<int>((position + 1) / c.per); }

// An indexer problem on both backends: keys written through each backend's WriteIndexKeys. The
// cache has a row per key of every page: page tokens, or max(1, page / per) entries of per tokens.
struct IndexProblem {
  IndexCase c;
  IndexerShape sh;
  PagedBatch b;
  std::vector<float> q, w;
  std::vector<float> keys;          // [slots, dim]: key of every cache slot (random in unused slots)
  std::vector<std::uint8_t> bytes;  // the CPU's cache (fp32 values or U8 entries)
  Buffer gpu_cache;

  IndexProblem(const IndexCase& ic, std::mt19937& rng, std::int64_t rows_outside = 2)
      : c(ic),
        sh{ic.heads, ic.dim, ic.topk, 1.0f, ic.page, ic.format, ic.per},
        b(ic.specs, ic.page, rng, rows_outside) {
    const std::int64_t slots = CacheRows(), dim = c.dim, n = b.n;
    sh.weight_scale = c.data == Data::kIntegers ? 0.125f : 1.0f / std::sqrt(static_cast<float>(c.heads * c.dim));
    std::uniform_int_distribution<int> tri(-1, 1), five(-2, 2), coin(0, 1);
    const bool fp8 = c.format == IndexKeyFormat::kFp8;
    auto integer_row = [&](float* row, int amax_at) {
      for (std::int64_t d = 0; d < dim; ++d) row[d] = static_cast<float>(tri(rng));
      // fp8: one ±7 sets the scale to 7/448 = 1/64, so every value's code is exact (64·x).
      if (fp8) row[amax_at] = coin(rng) ? 7.0f : -7.0f;
    };
    keys.resize(slots * dim);
    q.resize(n * c.heads * dim);
    w.resize(n * c.heads);
    if (c.data == Data::kIntegers) {
      for (std::int64_t s = 0; s < slots; ++s) integer_row(keys.data() + s * dim, 1);
      for (std::int64_t r = 0; r < n * c.heads; ++r) integer_row(q.data() + r * dim, 0);
      for (float& x : w) x = static_cast<float>(five(rng));
    } else {
      keys = Random(slots * dim, rng);
      if (c.data == Data::kEqualKeys)
        for (std::int64_t s = 1; s < slots; ++s) std::copy(keys.begin(), keys.begin() + dim, keys.begin() + s * dim);
      q = Random(n * c.heads * dim, rng);
      w = Random(n * c.heads, rng);
    }
    if (!fp8 && c.cache_dtype == DType::kBF16) keys = RoundBf16(keys);
    // Both caches through their WriteIndexKeys, every slot written.
    std::vector<std::int64_t> all(slots);
    std::iota(all.begin(), all.end(), 0);
    const std::int64_t width = IndexKeyWidth(c.format, dim);
    bytes.assign(slots * width * (fp8 ? 1 : 4), 0);
    cpu::WriteIndexKeys(HostView(keys, Shape{slots, dim}), all,
                        HostTensor(bytes.data(), fp8 ? DType::kU8 : DType::kF32, Shape{slots, width}), sh);
    gpu_cache = Buffer(fp8 ? DType::kU8 : c.cache_dtype, Shape{slots, width}, Gpu().allocator());
    Gpu().dsa().WriteIndexKeys(ToDevice(DType::kF32, Shape{slots, dim}, keys), all, gpu_cache, sh);
  }

  std::int64_t CacheRows() const { return b.pages * std::max<std::int64_t>(1, c.page / c.per); }
  // The cache row of key e of sequence `seq` (the CPU's EntrySlot; a token's slot for per 1).
  std::int64_t KeyRow(std::size_t seq, std::int64_t e) const { return EntrySlot(b.tables[seq], c.page, c.per, e); }

  Tensor CpuCache() {
    return HostTensor(bytes.data(), c.format == IndexKeyFormat::kFp8 ? DType::kU8 : DType::kF32,
                     Shape{CacheRows(), IndexKeyWidth(c.format, c.dim)});
  }

  std::vector<std::int32_t> RunCpu() {
    std::vector<std::int32_t> out(b.n * c.topk, -7);
    cpu::IndexerTopK(HostView(q, Shape{b.n, c.heads, c.dim}), HostView(w, Shape{b.n, c.heads}), CpuCache(), b.seqs, sh,
                     HostTensor(out.data(), DType::kI32, Shape{b.n, c.topk}));
    return out;
  }

  std::vector<std::int32_t> RunGpu(Buffer* reuse = nullptr) {
    std::vector<std::int32_t> out(b.n * c.topk, -7);
    Buffer dq = ToDevice(DType::kF32, Shape{b.n, c.heads, c.dim}, q), dw = ToDevice(DType::kF32, Shape{b.n, c.heads}, w);
    Buffer topk(DType::kI32, Shape{b.n, c.topk}, Gpu().allocator());
    Gpu().CopyBytesFromHost(out.data(), topk);
    Gpu().dsa().IndexerTopK(dq, dw, gpu_cache, b.seqs, sh, topk);
    Gpu().CopyBytesToHost(topk, out.data());
    return out;
  }

  // Score of every visible key of query row `row` in double precision from what both backends
  // see, and the row's scale for the tolerance (the largest Σ_h |coef · ReLU(dot)|).
  std::vector<double> Scores(std::size_t seq, int t, double* magnitude) const {
    const SeqAttention& s = b.seqs[seq];
    const std::int64_t row = s.query_start + t, dim = c.dim, heads = c.heads;
    const int visible = VisibleOf(c, s.query_positions[t]);
    const bool fp8 = c.format == IndexKeyFormat::kFp8;
    std::vector<double> qd(heads * dim);
    for (std::int64_t h = 0; h < heads; ++h) {
      const float* qh = q.data() + (row * heads + h) * dim;
      if (!fp8) {
        for (std::int64_t d = 0; d < dim; ++d) qd[h * dim + d] = qh[d];
        continue;
      }
      std::vector<std::uint8_t> codes(dim);
      const float scale = cpu::QuantizeFp8Row(qh, dim, codes.data());
      for (std::int64_t d = 0; d < dim; ++d) qd[h * dim + d] = static_cast<double>(F8E4M3ToF32(codes[d])) * scale;
    }
    std::vector<double> out(visible);
    *magnitude = 0.0;
    const std::int64_t width = IndexKeyWidth(c.format, dim);
    for (int p = 0; p < visible; ++p) {
      const std::int64_t slot = KeyRow(seq, p);
      std::vector<double> kd(dim);
      if (fp8) {
        const std::uint8_t* e = bytes.data() + slot * width;
        float scale;
        std::memcpy(&scale, e + dim, 4);
        for (std::int64_t d = 0; d < dim; ++d) kd[d] = static_cast<double>(F8E4M3ToF32(e[d])) * scale;
      } else {
        const float* e = reinterpret_cast<const float*>(bytes.data()) + slot * width;
        for (std::int64_t d = 0; d < dim; ++d) kd[d] = e[d];
      }
      double sum = 0.0, mag = 0.0;
      for (std::int64_t h = 0; h < heads; ++h) {
        double dot = 0.0;
        for (std::int64_t d = 0; d < dim; ++d) dot += qd[h * dim + d] * kd[d];
        const double term = static_cast<double>(sh.weight_scale) * w[row * heads + h] * std::max(dot, 0.0);
        sum += term;
        mag += std::fabs(term);
      }
      out[p] = sum;
      *magnitude = std::max(*magnitude, mag);
    }
    return out;
  }
};

// Every row against the CPU (see the file comment); returns the number of rows checked by scores.
int Compare(const IndexProblem& pr, const std::vector<std::int32_t>& got, const std::vector<std::int32_t>& want,
            bool exact) {
  const std::int64_t k = pr.c.topk;
  int scored = 0;
  std::vector<bool> owned(pr.b.n, false);
  for (std::size_t i = 0; i < pr.b.seqs.size(); ++i) {
    const SeqAttention& s = pr.b.seqs[i];
    for (int t = 0; t < s.query_len; ++t) {
      const std::int64_t row = s.query_start + t;
      owned[row] = true;
      const std::int32_t* g = got.data() + row * k;
      const std::int32_t* r = want.data() + row * k;
      const int visible = VisibleOf(pr.c, s.query_positions[t]);
      if (exact || visible <= k) {
        for (std::int64_t j = 0; j < k; ++j)
          if (g[j] != r[j]) {
            ADD_FAILURE() << Describe(pr.c) << ": row " << row << " (position " << s.query_positions[t] << ", "
                          << visible << " keys) entry " << j << " is " << g[j] << ", the CPU has " << r[j];
            return scored;
          }
        continue;
      }
      std::set<std::int32_t> seen;
      for (std::int64_t j = 0; j < k; ++j) {
        if (g[j] < 0 || g[j] >= visible || !seen.insert(g[j]).second) {
          ADD_FAILURE() << Describe(pr.c) << ": row " << row << " entry " << j << " = " << g[j]
                        << " is not a new visible key (" << visible << " visible)";
          return scored;
        }
      }
      double magnitude = 0.0;
      const std::vector<double> sc = pr.Scores(i, t, &magnitude);
      const double tol = 1e-4 * magnitude;
      std::vector<double> gs(k), rs(k);
      for (std::int64_t j = 0; j < k; ++j) {
        gs[j] = sc[g[j]];
        rs[j] = sc[r[j]];
        if (j > 0 && gs[j] > gs[j - 1] + tol) {
          ADD_FAILURE() << Describe(pr.c) << ": row " << row << " entry " << j << " scores " << gs[j]
                        << " above entry " << j - 1 << "'s " << gs[j - 1];
          return scored;
        }
      }
      std::sort(gs.rbegin(), gs.rend());
      std::sort(rs.rbegin(), rs.rend());
      for (std::int64_t j = 0; j < k; ++j)
        if (std::fabs(gs[j] - rs[j]) > tol) {
          ADD_FAILURE() << Describe(pr.c) << ": row " << row << " the " << j << "-th selected score is " << gs[j]
                        << ", the CPU's " << rs[j] << " (tol " << tol << ")";
          return scored;
        }
      ++scored;
    }
  }
  for (std::int64_t row = 0; row < pr.b.n; ++row)
    if (!owned[row])
      for (std::int64_t j = 0; j < k; ++j)
        if (got[row * k + j] != -7) {
          ADD_FAILURE() << Describe(pr.c) << ": row " << row << " belongs to no sequence and was written";
          return scored;
        }
  return scored;
}

void CheckIndexer(const IndexCase& c, std::mt19937& rng) {
  IndexProblem pr(c, rng);
  const std::vector<std::int32_t> want = pr.RunCpu(), got = pr.RunGpu();
  const int scored = Compare(pr, got, want, c.data != Data::kRandom);
  if (c.data == Data::kRandom) {
    EXPECT_GT(scored, 0) << Describe(c) << ": no row saw more than topk keys";
  }
}

// Prefill rows that see fewer and more keys than topk, a non-consecutive share, decode rows, long
// contexts (past the 4096 keys of the selection's direct sort).
const std::vector<DsaSeqSpec> kMixed = {{0, 70}, {40, 9}, {300, 1}, {5000, 1}, {9000, 2, 3}};

TEST(CudaDsa, IndexerExactCachesMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(63);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (std::int64_t page : {16, 5})
      CheckIndexer({kMixed, 4, 32, page, 64, IndexKeyFormat::kExact, dtype}, rng);
  CheckIndexer({{{100, 3}, {3000, 1}}, 64, 128, 64, 256, IndexKeyFormat::kExact, DType::kBF16}, rng);
}

TEST(CudaDsa, IndexerFp8TensorCoresMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(64);
  for (std::int64_t heads : {64, 32, 16})
    CheckIndexer({kMixed, heads, 128, 16, 64, IndexKeyFormat::kFp8, DType::kU8}, rng);
  // A page size that is not a multiple of 4 (4-byte copies), DeepSeek-V3.2's top-k with contexts
  // on both sides of 2048 and of 4096, and pages of 64.
  CheckIndexer({kMixed, 64, 128, 7, 64, IndexKeyFormat::kFp8, DType::kU8}, rng);
  CheckIndexer({{{0, 20}, {2040, 16}, {3000, 2}, {9000, 1}, {20000, 1}}, 64, 128, 64, 2048, IndexKeyFormat::kFp8,
                DType::kU8},
               rng);
}

TEST(CudaDsa, IndexerFp8OtherShapesMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(65);
  CheckIndexer({kMixed, 4, 32, 16, 64, IndexKeyFormat::kFp8, DType::kU8}, rng);
  CheckIndexer({kMixed, 24, 128, 16, 100, IndexKeyFormat::kFp8, DType::kU8}, rng);
}

// Exact scores, ties everywhere: the selection must be the CPU's, entry for entry.
TEST(CudaDsa, IndexerTiesGoToTheLowerPosition) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(66);
  const std::vector<DsaSeqSpec> specs = {{0, 30}, {500, 3}, {3000, 1}, {6000, 2, 7}};
  CheckIndexer({specs, 64, 128, 16, 64, IndexKeyFormat::kFp8, DType::kU8, Data::kIntegers}, rng);
  CheckIndexer({specs, 32, 128, 6, 2048, IndexKeyFormat::kFp8, DType::kU8, Data::kIntegers}, rng);
  CheckIndexer({specs, 8, 64, 16, 64, IndexKeyFormat::kFp8, DType::kU8, Data::kIntegers}, rng);
  CheckIndexer({specs, 4, 32, 16, 100, IndexKeyFormat::kExact, DType::kF32, Data::kIntegers}, rng);
  CheckIndexer({specs, 4, 32, 16, 2048, IndexKeyFormat::kExact, DType::kBF16, Data::kIntegers}, rng);
}

// Every key equal: more than 4096 equal scores at the k-th (the tie path) and fewer (the direct sort).
TEST(CudaDsa, IndexerAllEqualScoresSelectTheFirstPositions) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(67);
  const std::vector<DsaSeqSpec> specs = {{3000, 1}, {6000, 2}, {9000, 1}};
  CheckIndexer({specs, 64, 128, 16, 2048, IndexKeyFormat::kFp8, DType::kU8, Data::kEqualKeys}, rng);
  CheckIndexer({specs, 4, 32, 16, 64, IndexKeyFormat::kExact, DType::kF32, Data::kEqualKeys}, rng);
}

// A pure decode step captured once with positions and tables in an input block: the capture fails
// without the block; with it, the replay after every sequence advanced a token gives the eager
// call's selection exactly, and both are the CPU's (as above).
void CheckCapturedDecode(const IndexCase& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  CudaContext& ctx = Gpu().context();
  IndexProblem pr(c, rng, /*rows_outside=*/0);  // a decode step has no other rows
  PagedBatch& b = pr.b;
  b.MakeContiguous();
  const bool exact = c.data != Data::kRandom;
  Buffer dq = ToDevice(DType::kF32, Shape{b.n, c.heads, c.dim}, pr.q), dw = ToDevice(DType::kF32, Shape{b.n, c.heads}, pr.w);
  Buffer topk(DType::kI32, Shape{b.n, c.topk}, Gpu().allocator());
  auto run = [&] { Gpu().dsa().IndexerTopK(dq, dw, pr.gpu_cache, b.seqs, pr.sh, topk); };
  auto fetch = [&] {
    std::vector<std::int32_t> v(b.n * c.topk);
    Gpu().CopyBytesToHost(topk, v.data());
    return v;
  };
  run();
  Compare(pr, fetch(), pr.RunCpu(), exact);

  ctx.BeginCapture({});
  EXPECT_THROW(run(), Error) << Describe(c) << ": positions from outside an input block were captured";
  ctx.AbortCapture();

  const std::size_t bytes = b.block.size() * sizeof(std::int32_t);
  Buffer device_block(DType::kI32, Shape{static_cast<std::int64_t>(b.block.size())}, Gpu().allocator());
  Gpu().CopyBytesFromHost(b.block.data(), device_block);
  const InputMirror block{reinterpret_cast<const char*>(b.block.data()), static_cast<char*>(device_block.tensor().data),
                          bytes};
  MirrorScope mirror(ctx, block);
  CapturedGraph graph(ctx, run, block);
  EXPECT_FALSE(graph.uploaded_constants()) << Describe(c) << ": the decode path uploaded constants";
  b.Advance();
  Gpu().CopyBytesFromHost(b.block.data(), device_block);
  // Poisoned before the replay: every entry must be written again.
  const std::vector<std::int32_t> poison(b.n * c.topk, -7);
  Gpu().CopyBytesFromHost(poison.data(), topk);
  graph.Launch();
  const std::vector<std::int32_t> replayed = fetch();
  Compare(pr, replayed, pr.RunCpu(), exact);
  run();
  EXPECT_EQ(fetch(), replayed) << Describe(c) << ": replay and eager call differ";
}

TEST(CudaDsa, IndexerPureDecodeCapturedReplaysNextPositions) {
  FISSION_REQUIRE_GPU();
  for (IndexKeyFormat format : {IndexKeyFormat::kFp8, IndexKeyFormat::kExact})
    CheckCapturedDecode({{{10, 1}, {300, 1}, {3000, 1}, {7000, 1}, {17, 1}}, 64, 128, 16, 256, format, DType::kBF16},
                        68);
}

// DeepSeek-V4's CSA indexer: keys are compressed entries of 4 positions (tokens_per_entry 4), a query
// at position p sees entries [0, (p + 1) / 4) and topk holds entry indices. V4-Flash's shape (64
// heads of 128, topk 512, V4Indexer::Select's call) over: a prefill of 400 rows from position 1800
// whose first rows see fewer than 512 entries (all selected, then -1) and whose last see more; a
// prefill from position 0 (its first three rows see no entry: all -1); decode rows that see 511,
// 513, 2250 and 5000 entries (past the selection's direct sort of 4096); a context-parallel share;
// and two rows outside every sequence (left as they are).
const std::vector<DsaSeqSpec> kV4Entries = {{1800, 400}, {0, 300},    {2046, 1},  {2051, 1},
                                            {9000, 1},   {20000, 1},  {4000, 3, 5}};
// The tiny V4 fixture's indexer (16 heads of 16, topk 4): rows that see 0 to 4 entries and more.
const std::vector<DsaSeqSpec> kTinyV4Entries = {{0, 300}, {13, 1}, {15, 1}, {40, 5}, {600, 1}, {90, 4, 3}};

// Pages of 16, 64 and 256 positions hold 4, 16 and 64 entries (the tensor-core kernel's 16-byte
// copies of 4-entry runs), pages of 8 hold 2 (its 4-byte copies), and with pages of 2 an entry spans
// two pages and lives in the first (every other table entry).
TEST(CudaDsa, IndexerEntriesFp8TensorCoresMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(69);
  for (std::int64_t page : {16, 64, 256, 8, 2})
    CheckIndexer({kV4Entries, 64, 128, page, 512, IndexKeyFormat::kFp8, DType::kU8, Data::kRandom, 4}, rng);
  for (std::int64_t page : {16, 64, 8})
    CheckIndexer({kV4Entries, 64, 128, page, 512, IndexKeyFormat::kFp8, DType::kU8, Data::kIntegers, 4}, rng);
  CheckIndexer({kV4Entries, 16, 128, 64, 512, IndexKeyFormat::kFp8, DType::kU8, Data::kIntegers, 4}, rng);
  CheckIndexer({kV4Entries, 32, 128, 16, 64, IndexKeyFormat::kFp8, DType::kU8, Data::kRandom, 4}, rng);
  // Every entry equal: more than 4096 equal scores at the 512th (the tie path) and fewer.
  CheckIndexer({{{20000, 1}, {17000, 2}, {9000, 1}}, 64, 128, 64, 512, IndexKeyFormat::kFp8, DType::kU8,
                Data::kEqualKeys, 4},
               rng);
}

TEST(CudaDsa, IndexerEntriesExactCachesMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(70);
  for (DType dtype : {DType::kF32, DType::kBF16})
    for (std::int64_t page : {16, 64, 256})
      CheckIndexer({kV4Entries, 64, 128, page, 512, IndexKeyFormat::kExact, dtype, Data::kRandom, 4}, rng);
  CheckIndexer({kV4Entries, 64, 128, 16, 512, IndexKeyFormat::kExact, DType::kBF16, Data::kIntegers, 4}, rng);
  CheckIndexer({kV4Entries, 64, 128, 2, 512, IndexKeyFormat::kExact, DType::kF32, Data::kIntegers, 4}, rng);
}

// The fp32 kernel for both formats at the tiny fixture's shape.
TEST(CudaDsa, IndexerEntriesTinyV4ShapeMatchCpu) {
  FISSION_REQUIRE_GPU();
  std::mt19937 rng(71);
  for (std::int64_t page : {16, 64, 256}) {
    for (Data data : {Data::kIntegers, Data::kRandom}) {
      CheckIndexer({kTinyV4Entries, 16, 16, page, 4, IndexKeyFormat::kFp8, DType::kU8, data, 4}, rng);
      CheckIndexer({kTinyV4Entries, 16, 16, page, 4, IndexKeyFormat::kExact, DType::kF32, data, 4}, rng);
    }
  }
  CheckIndexer({kTinyV4Entries, 16, 16, 16, 4, IndexKeyFormat::kExact, DType::kBF16, Data::kIntegers, 4}, rng);
}

// Captured decode over entries. Entries seen before and after the advance: 2 → 3, 0 → 1, 511 → 512,
// 512 → 513 (scored only in the replay), 1750 → 1750 and 5000 → 5000 (V4-Flash's shape); 0 → 1,
// 3 → 4, 4 → 5 (scored only in the replay) and 75 → 75 (the tiny shape's topk 4).
TEST(CudaDsa, IndexerEntriesPureDecodeCapturedReplaysNextPositions) {
  FISSION_REQUIRE_GPU();
  const std::vector<DsaSeqSpec> flash = {{10, 1}, {2, 1}, {2046, 1}, {2050, 1}, {7000, 1}, {20000, 1}};
  const std::vector<DsaSeqSpec> tiny = {{2, 1}, {14, 1}, {18, 1}, {300, 1}};
  for (IndexKeyFormat format : {IndexKeyFormat::kFp8, IndexKeyFormat::kExact}) {
    for (std::int64_t page : {16, 64})
      CheckCapturedDecode({flash, 64, 128, page, 512, format, DType::kBF16, Data::kIntegers, 4}, 72);
    CheckCapturedDecode({flash, 64, 128, 64, 512, format, DType::kBF16, Data::kRandom, 4}, 73);
    CheckCapturedDecode({tiny, 16, 16, 16, 4, format, DType::kF32, Data::kIntegers, 4}, 74);
  }
}

}  // namespace
}  // namespace fission::kernels::cuda::testing
