// DeepSeek Sparse Attention's kernels at DeepSeek-V3.2's dimensions (indexer 64 heads × 128,
// top-2048; MLA 128 heads, kv_lora 512 + rope 64: bench/configs has no V3.2 config, so these are
// the published values) and GLM-5's (indexer 32 heads × 128; MLA 64 heads), at 32K and 60K
// contexts. Each case prints
//   PREDICT <name> <us>             the byte/FLOP model below, before the measurement
//   RESULT  <name> <us> <rate> <unit>   as the other modes (tools/gpu/report.py reads it)
//   INFO    <name> ...              the rate against its ceilings, the prediction, and the time of
//                                   a reference run in the same invocation with the ratio
// Ceilings measured first in this process: a 2 GiB device copy (HBM, bytes read + written; the
// datasheet says 4.8 TB/s) and mma.sync's own rate (fp8 m16n8k32 and bf16 m16n8k16 on register
// operands); against them the dense tensor-core figures this project's other benchmarks use, FP8
// 1300 TFLOP/s and bf16 790 TFLOP/s (cuBLASLt / torch on large GEMMs here).
//
//   dsa_indexer / dsa_topk: IndexerTopK on an fp8 cache (tensor cores), a prefill chunk of 4096
//     rows at the end of the context (one sequence) and a decode batch of 64 sequences. The
//     selection's share is the op's time minus its time with FISSION_DSA_SKIP_TOPK=1 (a
//     benchmark knob of dsa_indexer.cu). Reference: the exact-mode op (bf16 cache, fp32 kernel) on
//     the same inputs, at 32K.
//   dsa_sparse_decode: SparseMla, absorbed form, batches of 64 and 1, each row over 2048 random
//     positions of its context. Reference: the dense absorbed MLA over 2048 keys a row.
//   dsa_sparse_prefill: SparseMla, expanded form (computed in the latent space), 4096 rows at the
//     end of the context, 2048 positions each. Reference: the dense absorbed MLA with the same
//     FLOPs (4096 rows over 2048 keys each).
#include "bench/cuda/dsa_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fission::bench {
namespace {

using kernels::IndexerShape;
using kernels::IndexKeyFormat;
using kernels::MlaShape;
using kernels::SeqAttention;
using kernels::cuda::CudaBackend;

CudaBackend* gpu = nullptr;

constexpr double kFp8Dense = 1300.0, kBf16Dense = 790.0, kHbmNominal = 4800.0;  // TFLOP/s, GB/s
// The model behind the PREDICT lines (written before the first run on the device; docs/cuda.md
// compares): fp8 scoring at 450 TFLOP/s, streaming contiguous pages at 3.6 TB/s; the selection
// reads a row's scores twice at 120 GB/s (one multiprocessor's share of L2) plus 4 us of sort and
// scan, rows spread over the multiprocessors; sparse attention at 260 TFLOP/s on the tensor cores or
// gathering its 1152-byte rows at 3.0 TB/s, whichever is slower, plus 15 us for the absorption and
// value GEMMs.
constexpr double kPredFp8Tflops = 450.0, kPredStreamGbs = 3600.0, kPredRowGbs = 120.0, kPredSortUs = 4.0;
constexpr double kPredBf16Tflops = 260.0, kPredGatherGbs = 3000.0, kPredGemmUs = 15.0;
constexpr int kTopk = 2048, kIndexDim = 128, kPage = 64;

struct Model {
  const char* name;
  int index_heads, mla_heads;
};
const Model kModels[] = {{"v32", 64, 128}, {"glm5", 32, 64}};
const int kContexts[] = {32768, 61440};

double TimeUs(const std::function<void()>& fn, int warmup = 2, int reps = 7) {
  cudaStream_t s = gpu->context().stream();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < warmup; ++i) fn();
  gpu->Synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a, s);
    fn();
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms * 1e3);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Ceilings {
  double hbm_gbs = 0, fp8_mma = 0, bf16_mma = 0;
};

const Ceilings& MeasuredCeilings() {
  static const Ceilings c = [] {
    Ceilings r;
    const std::size_t bytes = 2ull << 30;
    void *x = nullptr, *y = nullptr;
    if (cudaMalloc(&x, bytes) == cudaSuccess && cudaMalloc(&y, bytes) == cudaSuccess) {
      cudaMemset(x, 1, bytes);
      const double us = TimeUs([&] { cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, gpu->context().stream()); });
      r.hbm_gbs = 2.0 * bytes / (us * 1e-6) / 1e9;
      std::printf("RESULT dsa_ceiling_hbm_copy_2GiB %.1f %.0f GB/s\n", us, r.hbm_gbs);
    }
    cudaFree(x);
    cudaFree(y);
    r.fp8_mma = MmaCeilingTflops(true, gpu->context().stream());
    r.bf16_mma = MmaCeilingTflops(false, gpu->context().stream());
    std::printf("RESULT dsa_ceiling_mma_sync_fp8 0 %.1f TFLOP/s\n", r.fp8_mma);
    std::printf("RESULT dsa_ceiling_mma_sync_bf16 0 %.1f TFLOP/s\n", r.bf16_mma);
    std::printf("INFO dsa ceilings: HBM copy %.0f GB/s (datasheet %.0f); mma.sync fp8 %.0f TFLOP/s, bf16 %.0f TFLOP/s "
                "(dense tensor-core figures used below: fp8 %.0f, bf16 %.0f)\n",
                r.hbm_gbs, kHbmNominal, r.fp8_mma, r.bf16_mma, kFp8Dense, kBf16Dense);
    std::fflush(stdout);
    return r;
  }();
  return c;
}

// A paged layout: `seqs` sequences of `keys` keys each, pages of kPage in a shuffled order.
struct Pages {
  std::vector<std::vector<std::int32_t>> tables;
  std::int64_t slots = 0;
  Pages(int seqs, std::int64_t keys, std::mt19937& rng) {
    const std::int64_t per = (keys + kPage - 1) / kPage;
    std::vector<std::int32_t> order(seqs * per);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int s = 0; s < seqs; ++s) tables.emplace_back(order.begin() + s * per, order.begin() + (s + 1) * per);
    slots = static_cast<std::int64_t>(order.size()) * kPage;
  }
};

Buffer Uniform(DType dtype, Shape shape, float bound, std::uint64_t seed) {
  Buffer b(dtype, shape, gpu->allocator());
  gpu->FillUniform(b, bound, seed);
  return b;
}

// An index key cache of `slots` random keys written through WriteIndexKeys.
Buffer IndexCache(std::int64_t slots, IndexKeyFormat format, std::uint64_t seed) {
  const IndexerShape sh{64, kIndexDim, kTopk, 1.0f, kPage, format};
  Buffer cache(format == IndexKeyFormat::kFp8 ? DType::kU8 : DType::kBF16,
               Shape{slots, kernels::IndexKeyWidth(format, kIndexDim)}, gpu->allocator());
  constexpr std::int64_t kChunk = 1 << 20;
  Buffer keys = Uniform(DType::kF32, Shape{std::min(slots, kChunk), kIndexDim}, 1.0f, seed);
  std::vector<std::int64_t> where;
  for (std::int64_t s0 = 0; s0 < slots; s0 += kChunk) {
    const std::int64_t n = std::min(kChunk, slots - s0);
    where.resize(n);
    std::iota(where.begin(), where.end(), s0);
    gpu->dsa().WriteIndexKeys(keys.tensor().Rows(0, n), where, cache, sh);
  }
  gpu->Synchronize();
  return cache;
}

// count distinct positions of [0, visible): an arithmetic walk with a step coprime to visible.
void RandomSelection(std::int32_t* out, int visible, int count, std::mt19937& rng) {
  std::int64_t step = 1 + rng() % std::max(1, visible - 1);
  while (std::gcd<std::int64_t>(step, visible) != 1) ++step;
  std::int64_t at = rng() % visible;
  for (int j = 0; j < count; ++j, at = (at + step) % visible) out[j] = static_cast<std::int32_t>(at);
}

void BenchIndexer() {
  const Ceilings& ceil = MeasuredCeilings();
  std::mt19937 rng(21);
  for (const Model& m : kModels) {
    for (int ctx : kContexts) {
      for (bool prefill : {true, false}) {
        const int seqs = prefill ? 1 : 64, rows = prefill ? 4096 : 64;
        Pages pages(seqs, ctx, rng);
        Buffer cache = IndexCache(pages.slots, IndexKeyFormat::kFp8, rng());
        std::vector<std::vector<std::int32_t>> positions(seqs);
        std::vector<SeqAttention> sa;
        for (int s = 0; s < seqs; ++s) {
          const int q = prefill ? rows : 1;
          for (int t = 0; t < q; ++t) positions[s].push_back(ctx - q + t);
          sa.push_back({prefill ? 0 : s, q, ctx, positions[s], pages.tables[s], !prefill});
        }
        const IndexerShape sh{m.index_heads, kIndexDim, kTopk, 1.0f / std::sqrt(static_cast<float>(m.index_heads * kIndexDim)),
                              kPage, IndexKeyFormat::kFp8};
        Buffer q = Uniform(DType::kF32, Shape{rows, m.index_heads, kIndexDim}, 1.0f, rng());
        Buffer w = Uniform(DType::kF32, Shape{rows, m.index_heads}, 1.0f, rng());
        Buffer topk(DType::kI32, Shape{rows, kTopk}, gpu->allocator());
        double keys_scored = 0;
        for (const auto& p : positions)
          for (int pos : p) keys_scored += pos + 1;
        const double flop = keys_scored * 2.0 * m.index_heads * kIndexDim, bytes = keys_scored / rows * seqs * (kIndexDim + 4);
        const std::string name = std::string(m.name) + (prefill ? "_prefill" : "_decode") + "_ctx" + std::to_string(ctx);
        const double topk_pred = (2.0 * 4.0 * ctx / (kPredRowGbs * 1e3) + kPredSortUs) * std::ceil(rows / 132.0);
        const double score_pred = prefill ? flop / (kPredFp8Tflops * 1e6) : bytes / (kPredStreamGbs * 1e3);
        std::printf("PREDICT dsa_indexer_%s %.1f\nPREDICT dsa_topk_%s %.1f\n", name.c_str(), score_pred + topk_pred,
                    name.c_str(), topk_pred);
        std::fflush(stdout);
        auto run = [&] { gpu->dsa().IndexerTopK(q, w, cache, sa, sh, topk); };
        const int reps = prefill ? 5 : 9;
        const double full = TimeUs(run, 2, reps);
        setenv("FISSION_DSA_SKIP_TOPK", "1", 1);
        const double score = TimeUs(run, 2, reps);
        unsetenv("FISSION_DSA_SKIP_TOPK");
        const double sel = std::max(0.0, full - score);
        if (prefill)
          std::printf("RESULT dsa_indexer_%s %.1f %.1f TFLOP/s\n", name.c_str(), full, flop / (full * 1e-6) / 1e12);
        else
          std::printf("RESULT dsa_indexer_%s %.1f %.0f GB/s\n", name.c_str(), full, bytes / (full * 1e-6) / 1e9);
        std::printf("RESULT dsa_topk_%s %.1f %.3f Mrows/s\n", name.c_str(), sel, rows / std::max(sel, 1e-3));
        const double score_tflops = flop / (score * 1e-6) / 1e12, score_gbs = bytes / (score * 1e-6) / 1e9;
        std::printf("INFO dsa_indexer_%s scoring alone %.1f us: %.1f TFLOP/s = %.0f%% of fp8 %.0f, %.0f%% of mma.sync fp8 "
                    "%.0f; %.0f GB/s of keys = %.0f%% of the copy's %.0f; selection %.1f us = %.0f%% of the indexer "
                    "(goal <= 15%%); predicted %.1f us total (measured/predicted %.2f)\n",
                    name.c_str(), score, score_tflops, 100 * score_tflops / kFp8Dense, kFp8Dense,
                    100 * score_tflops / std::max(ceil.fp8_mma, 1e-9), ceil.fp8_mma, score_gbs,
                    100 * score_gbs / std::max(ceil.hbm_gbs, 1e-9), ceil.hbm_gbs, sel, 100 * sel / full,
                    score_pred + topk_pred, full / (score_pred + topk_pred));
        if (ctx == kContexts[0]) {
          IndexerShape exact = sh;
          exact.key_format = IndexKeyFormat::kExact;
          Buffer exact_cache = IndexCache(pages.slots, IndexKeyFormat::kExact, rng());
          const double ref = TimeUs([&] { gpu->dsa().IndexerTopK(q, w, exact_cache, sa, exact, topk); }, 1, 3);
          std::printf("INFO dsa_indexer_%s reference: exact-mode op (bf16 cache, fp32 kernel) %.1f us; fp8 / exact time "
                      "ratio %.3f (%.1fx faster)\n",
                      name.c_str(), ref, full / ref, ref / full);
        }
        std::fflush(stdout);
      }
    }
  }
}

MlaShape V3Mla(std::int64_t heads) { return {heads, 128, 64, 128, 512, 1.0f / std::sqrt(192.0f), kPage}; }

// Sparse MLA over `rows` rows; decode: one sequence per row at the end of its context, else one
// sequence whose last `rows` positions are the rows.
void BenchSparse(bool decode) {
  const Ceilings& ceil = MeasuredCeilings();
  std::mt19937 rng(22);
  for (const Model& m : kModels) {
    for (int ctx : kContexts) {
      for (int rows : decode ? std::vector<int>{64, 1} : std::vector<int>{4096}) {
        const int seqs = decode ? rows : 1, heads = m.mla_heads;
        Pages pages(seqs, ctx, rng);
        Buffer cache = Uniform(DType::kBF16, Shape{pages.slots, 576}, 1.0f, rng());
        Buffer q = Uniform(DType::kBF16, Shape{rows, heads, 192}, 1.0f, rng());
        Buffer kv_b = Uniform(DType::kBF16, Shape{heads * 256, 512}, 0.05f, rng());
        Buffer out(DType::kBF16, Shape{rows, heads, 128}, gpu->allocator());
        std::vector<std::vector<std::int32_t>> positions(seqs);
        std::vector<SeqAttention> sa;
        std::vector<std::int32_t> sel(static_cast<std::size_t>(rows) * kTopk);
        for (int s = 0; s < seqs; ++s) {
          const int qn = decode ? 1 : rows;
          for (int t = 0; t < qn; ++t) positions[s].push_back(ctx - qn + t);
          sa.push_back({decode ? s : 0, qn, ctx, positions[s], pages.tables[s], decode});
        }
        for (int r = 0; r < rows; ++r)
          RandomSelection(sel.data() + static_cast<std::size_t>(r) * kTopk, decode ? ctx : ctx - rows + r + 1, kTopk, rng);
        Buffer topk(DType::kI32, Shape{rows, kTopk}, gpu->allocator());
        gpu->CopyBytesFromHost(sel.data(), topk);
        const MlaShape sh = V3Mla(heads);
        const double flop = static_cast<double>(rows) * 2.0 * heads * kTopk * (576 + 512);
        const double bytes = static_cast<double>(rows) * kTopk * 576 * 2;
        const std::string name = std::string(decode ? "dsa_sparse_decode_" : "dsa_sparse_prefill_") + m.name +
                                 (decode ? "_b" + std::to_string(rows) : std::string()) + "_ctx" + std::to_string(ctx);
        const double pred = std::max(bytes / (kPredGatherGbs * 1e3), flop / (kPredBf16Tflops * 1e6)) + kPredGemmUs;
        std::printf("PREDICT %s %.1f\n", name.c_str(), pred);
        std::fflush(stdout);
        const double us =
            TimeUs([&] { gpu->dsa().SparseMla(q, cache, kv_b, topk, sa, sh, /*absorbed=*/decode, out); }, 2, decode ? 9 : 5);
        // The reference: dense absorbed MLA, every row over 2048 keys (one sequence per row, all on
        // the first sequence's pages).
        std::vector<std::int32_t> ref_pos(rows, kTopk - 1);
        std::vector<SeqAttention> ref_sa;
        for (int r = 0; r < rows; ++r)
          ref_sa.push_back({r, 1, kTopk, std::span<const std::int32_t>(&ref_pos[r], 1), pages.tables[0], true});
        const double ref = TimeUs([&] { gpu->mla().Absorbed(q, cache, kv_b, ref_sa, sh, out); }, 2, decode ? 9 : 5);
        const double gbs = bytes / (us * 1e-6) / 1e9, tflops = flop / (us * 1e-6) / 1e12;
        if (decode)
          std::printf("RESULT %s %.1f %.0f GB/s\n", name.c_str(), us, gbs);
        else
          std::printf("RESULT %s %.1f %.1f TFLOP/s\n", name.c_str(), us, tflops);
        std::printf("INFO %s %.0f GB/s of gathered latent rows = %.0f%% of the copy's %.0f (%.0f%% of %.0f); %.1f "
                    "TFLOP/s = %.0f%% of bf16 %.0f, %.0f%% of mma.sync bf16 %.0f; predicted %.1f us (measured/predicted "
                    "%.2f); reference dense absorbed MLA over %d keys a row %.1f us: sparse/dense time %.2f\n",
                    name.c_str(), gbs, 100 * gbs / std::max(ceil.hbm_gbs, 1e-9), ceil.hbm_gbs, 100 * gbs / kHbmNominal,
                    kHbmNominal, tflops, 100 * tflops / kBf16Dense, kBf16Dense,
                    100 * tflops / std::max(ceil.bf16_mma, 1e-9), ceil.bf16_mma, pred, us / pred, kTopk, ref, us / ref);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace

void RunDsaBenchmarks(CudaBackend& backend, const std::function<bool(const char*)>& want) {
  gpu = &backend;
  if (want("dsa_topk")) BenchTopkAlone(backend);
  if (want("dsa_indexer") || want("dsa_topk")) BenchIndexer();
  if (want("dsa_sparse_decode")) BenchSparse(true);
  if (want("dsa_sparse_prefill")) BenchSparse(false);
}

}  // namespace fission::bench
