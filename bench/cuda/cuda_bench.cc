// Kernel benchmarks of the CUDA backend at DeepSeek-V3 shapes (a program, not a test): GEMMs (bf16
// and FP8), FP8 routed experts, MLA prefill attention (expanded form) and MLA decode attention
// (absorbed form).
// Prints one line per case: `RESULT <name> <time_us> <rate> <unit>`; tools/gpu/report.py puts them
// next to torch's numbers from tools/gpu/torch_ref.py.
//
// Also the sampler (Backend::Sample) on DeepSeek-V3's vocabulary, next to the host path it replaces
// (copy the logits to the host, then kernels::SampleOnHost per row).
//
// And the operation table's perf mode (`ops`, testing/op_cases.h): every case at 16 times its test
// size, its time, bytes and FLOPs against the H200's ceilings (4.2 TB/s HBM; 1300 TFLOP/s FP8,
// 750 bf16, 67 fp32 without tensor cores).
//
// And DeepSeek Sparse Attention's kernels (bench/cuda/dsa_bench.cc): dsa_indexer, dsa_topk,
// dsa_sparse_prefill, dsa_sparse_decode.
//
// And the MXFP4 and MXFP8 routed experts (bench/cuda/moe_mx_bench.cc): moe_mxfp4, moe_mxfp8;
// DeepSeek-V4's FP4 (W4A8) experts (bench/cuda/moe_fp4_bench.cc): moe_fp4.
//
// Usage: fission_cuda_bench [copy] [gemm] [fp8] [moe_fp8] [moe_mxfp4] [moe_mxfp8] [moe_fp4]
//                           [prefill] [decode] [sample] [ops]
//                           [dsa_indexer] [dsa_topk] [dsa_sparse_prefill] [dsa_sparse_decode]
//        (all when none is named)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda/dsa_bench.h"
#include "bench/cuda/moe_fp4_bench.h"
#include "bench/cuda/moe_mx_bench.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "testing/op_cases.h"

namespace fission::kernels::cuda {
namespace {

#define BENCH_CUDA(call)                                                              \
  do {                                                                                \
    cudaError_t e = (call);                                                           \
    if (e != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)

CudaBackend* gpu = nullptr;

// Median time of `fn` in microseconds over `reps` timed runs after `warmup` runs.
double TimeUs(const std::function<void(int)>& fn, int warmup = 3, int reps = 15) {
  cudaStream_t s = gpu->context().stream();
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) fn(i);
  gpu->Synchronize();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    BENCH_CUDA(cudaEventRecord(a, s));
    fn(i);
    BENCH_CUDA(cudaEventRecord(b, s));
    BENCH_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Random device data: normal values from a fixed host pool, read from a random offset, scaled. The
// pool keeps setup time small for the multi-gigabyte weight sets.
Buffer RandomDevice(DType dtype, Shape shape, float scale, std::mt19937& rng) {
  static const std::vector<float> pool = [] {
    std::mt19937 r(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> p(1 << 22);
    for (float& x : p) x = normal(r);
    return p;
  }();
  std::vector<float> v(shape.numel());
  std::size_t at = rng() % pool.size();
  for (float& x : v) {
    x = pool[at] * scale;
    if (++at == pool.size()) at = 0;
  }
  if (dtype == DType::kF8E4M3)
    for (float& x : v) x = std::clamp(x, -448.0f, 448.0f);
  Buffer b(dtype, shape, gpu->allocator());
  gpu->CopyFromHost(v.data(), b);
  return b;
}

struct GemmShape {
  const char* name;
  std::int64_t n, k;  // out features, in features
};
const GemmShape kGemms[] = {{"q_a_proj", 1536, 7168},  {"q_b_proj", 24576, 1536}, {"kv_a_proj", 576, 7168},
                            {"o_proj", 7168, 16384},   {"expert_gate_up", 4096, 7168},
                            {"expert_down", 7168, 2048}};
// bf16 only: the lm_head (kept bf16 in FP8 checkpoints too), the largest read of a decode step.
const GemmShape kBf16Gemms[] = {{"lm_head", 129280, 7168}};
const std::int64_t kMs[] = {1, 64, 4096};
const std::int64_t kFp8Ms[] = {1, 8, 32, 64, 4096};  // FP8 switches kernels between 16 and 64 tokens

// Enough weight copies that one pass over them is well past the 60 MB L2.
int Copies(std::int64_t bytes) { return static_cast<int>(std::clamp<std::int64_t>((256ll << 20) / bytes + 1, 1, 16)); }

void BenchGemm(bool fp8) {
  std::mt19937 rng(1);
  std::vector<GemmShape> shapes(std::begin(kGemms), std::end(kGemms));
  if (!fp8) shapes.insert(shapes.end(), std::begin(kBf16Gemms), std::end(kBf16Gemms));
  for (const GemmShape& g : shapes) {
    const DType wt = fp8 ? DType::kF8E4M3 : DType::kBF16;
    const int copies = Copies(g.n * g.k * (fp8 ? 1 : 2));
    std::vector<Buffer> w, ws;
    for (int c = 0; c < copies; ++c) {
      w.push_back(RandomDevice(wt, Shape{g.n, g.k}, fp8 ? 100.0f : 0.02f, rng));
      if (fp8) ws.push_back(RandomDevice(DType::kF32, Shape{(g.n + 127) / 128, (g.k + 127) / 128}, 1e-4f, rng));
    }
    for (std::int64_t m : fp8 ? std::span<const std::int64_t>(kFp8Ms) : std::span<const std::int64_t>(kMs)) {
      Buffer x = RandomDevice(DType::kBF16, Shape{m, g.k}, 1.0f, rng);
      Buffer out(DType::kBF16, Shape{m, g.n}, gpu->allocator());
      const double us = TimeUs([&](int i) {
        if (fp8)
          gpu->Linear(x, WeightView(w[i % copies], ws[i % copies], WeightFormat::Fp8Block128()), out);
        else
          gpu->Linear(x, w[i % copies].tensor(), out);
      });
      const double tflops = 2.0 * m * g.n * g.k / (us * 1e-6) / 1e12;
      std::printf("RESULT gemm_%s_%s_m%lld %.2f %.1f TFLOP/s\n", fp8 ? "fp8" : "bf16", g.name,
                  static_cast<long long>(m), us, tflops);
      std::fflush(stdout);
    }
  }
  if (fp8)
    std::printf("INFO fp8_path %s\n", gpu->context().fp8_layout == 4 ? "own-kernel" : "cublaslt-block-scaled");
}

// FP8 routed experts at DeepSeek-V3's shapes (hidden 7168, moe_intermediate 2048, 256 experts,
// top-8, no tensor parallelism): the whole op (permutation, quantization, both products, combine).
// GB/s counts the expert weights read once: codes and scales of every expert that has a token.
void BenchMoeFp8() {
  constexpr std::int64_t kHidden = 7168, kInter = 2048, kExperts = 256, kTopK = 8;
  std::mt19937 rng(4);
  std::vector<Buffer> gu, gus, down, downs;
  std::vector<Tensor> tgu, tgus, tdown, tdowns;
  auto weight = [&](std::int64_t m, std::int64_t k, std::vector<Buffer>& w, std::vector<Buffer>& ws) {
    w.emplace_back(DType::kF8E4M3, Shape{m, k}, gpu->allocator());
    gpu->FillUniform(w.back(), 448.0f, rng());
    // Codes span ±448; block scales give the dequantized weights a standard deviation of 1/sqrt(k).
    const float scale = std::sqrt(3.0f / static_cast<float>(k)) / 448.0f;
    ws.emplace_back(DType::kF32, Shape{(m + 127) / 128, (k + 127) / 128}, gpu->allocator());
    std::vector<float> s(ws.back().tensor().numel(), scale);
    gpu->CopyFromHost(s.data(), ws.back());
  };
  for (std::int64_t e = 0; e < kExperts; ++e) {
    weight(2 * kInter, kHidden, gu, gus);
    weight(kHidden, kInter, down, downs);
  }
  for (std::int64_t e = 0; e < kExperts; ++e) {
    tgu.push_back(gu[e]);
    tgus.push_back(gus[e]);
    tdown.push_back(down[e]);
    tdowns.push_back(downs[e]);
  }
  const double expert_bytes = 2.0 * kInter * kHidden + kHidden * kInter +
                              4.0 * (gus[0].tensor().numel() + downs[0].tensor().numel());
  for (std::int64_t n : {1, 64, 4096}) {
    // Distinct experts per token, uniformly over all of them (balanced routing).
    std::vector<float> ids;
    std::vector<bool> active(kExperts, false);
    std::vector<std::int32_t> pool(kExperts);
    for (std::int64_t e = 0; e < kExperts; ++e) pool[e] = static_cast<std::int32_t>(e);
    for (std::int64_t t = 0; t < n; ++t) {
      std::shuffle(pool.begin(), pool.end(), rng);
      std::vector<std::int32_t> chosen(pool.begin(), pool.begin() + kTopK);
      std::sort(chosen.begin(), chosen.end());
      for (std::int32_t e : chosen) {
        ids.push_back(static_cast<float>(e));
        active[e] = true;
      }
    }
    const auto used = std::count(active.begin(), active.end(), true);
    Buffer did(DType::kI32, Shape{n, kTopK}, gpu->allocator());
    gpu->CopyFromHost(ids.data(), did);
    Buffer w = RandomDevice(DType::kF32, Shape{n, kTopK}, 0.3f, rng);
    Buffer x = RandomDevice(DType::kBF16, Shape{n, kHidden}, 1.0f, rng);
    Buffer out(DType::kF32, Shape{n, kHidden}, gpu->allocator());
    std::vector<WeightView> gate_up, down;
    for (std::size_t e = 0; e < tgu.size(); ++e) {
      gate_up.emplace_back(tgu[e], tgus[e], WeightFormat::Fp8Block128());
      down.emplace_back(tdown[e], tdowns[e], WeightFormat::Fp8Block128());
    }
    const double us = TimeUs([&](int) { gpu->MoeExperts(x, did, w, gate_up, down, out); });
    std::printf("RESULT moe_fp8_v3_n%lld %.1f %.0f GB/s\n", static_cast<long long>(n), us,
                used * expert_bytes / (us * 1e-6) / 1e9);
    std::printf("INFO moe_fp8_v3_n%lld active_experts %lld\n", static_cast<long long>(n), static_cast<long long>(used));
    std::fflush(stdout);
  }
}

MlaShape V3Mla(std::int64_t heads, std::int64_t page_size) {
  return {heads, 128, 64, 128, 512, 1.0f / std::sqrt(192.0f), page_size};
}

void BenchPrefill() {
  std::mt19937 rng(2);
  const std::int64_t heads = 16, page = 64;  // DeepSeek-V3's 128 heads under TP 8
  for (std::int64_t s : {4096, 16384, 65536}) {
    const std::int64_t pages = s / page;
    Buffer cache = RandomDevice(DType::kBF16, Shape{pages * page, 576}, 1.0f, rng);
    Buffer q = RandomDevice(DType::kBF16, Shape{s, heads, 192}, 1.0f, rng);
    Buffer kv_b = RandomDevice(DType::kBF16, Shape{heads * 256, 512}, 0.05f, rng);
    Buffer out(DType::kBF16, Shape{s, heads, 128}, gpu->allocator());
    std::vector<std::int32_t> table(pages);
    for (std::int64_t i = 0; i < pages; ++i) table[i] = static_cast<std::int32_t>(i);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<std::int32_t> positions(s);
    for (std::int64_t i = 0; i < s; ++i) positions[i] = static_cast<std::int32_t>(i);
    std::vector<SeqAttention> seqs = {{0, static_cast<std::int32_t>(s), static_cast<std::int32_t>(s), positions, table}};
    const MlaShape sh = V3Mla(heads, page);
    // Causal attention FLOPs (QK over 192 dims, PV over 128), the same count torch's SDPA gets at d=160.
    const double flops = 2.0 * heads * (static_cast<double>(s) * (s + 1) / 2) * (192 + 128);
    for (const char* kernel : {"default", "generic"}) {
      setenv("FISSION_MLA_PREFILL", kernel, 1);
      const double us = TimeUs([&](int) { gpu->mla().Expanded(q, cache, kv_b, seqs, sh, out); }, 2, 5);
      std::printf("RESULT prefill_mla%s_s%lld %.1f %.1f TFLOP/s\n", kernel[0] == 'g' ? "_generic" : "",
                  static_cast<long long>(s), us, flops / (us * 1e-6) / 1e12);
      std::fflush(stdout);
    }
    unsetenv("FISSION_MLA_PREFILL");
  }
}

void BenchDecode() {
  std::mt19937 rng(3);
  const std::int64_t page = 64;
  struct Case {
    std::int64_t batch, ctx, heads;
  };
  for (Case c : {Case{64, 4096, 16}, Case{64, 4096, 128}, Case{1, 65536, 16}, Case{1, 65536, 128},
                 Case{8, 32768, 128}}) {
    const std::int64_t pages_per = (c.ctx + 1 + page - 1) / page, pages = pages_per * c.batch;
    Buffer cache = RandomDevice(DType::kBF16, Shape{pages * page, 576}, 1.0f, rng);
    Buffer q = RandomDevice(DType::kBF16, Shape{c.batch, c.heads, 192}, 1.0f, rng);
    Buffer kv_b = RandomDevice(DType::kBF16, Shape{c.heads * 256, 512}, 0.05f, rng);
    Buffer out(DType::kBF16, Shape{c.batch, c.heads, 128}, gpu->allocator());
    std::vector<std::int32_t> order(pages);
    for (std::int64_t i = 0; i < pages; ++i) order[i] = static_cast<std::int32_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<std::int32_t>> tables(c.batch);
    std::vector<SeqAttention> seqs;
    const std::int32_t position = static_cast<std::int32_t>(c.ctx);  // the new token follows ctx cached ones
    for (std::int64_t b = 0; b < c.batch; ++b) {
      tables[b].assign(order.begin() + b * pages_per, order.begin() + (b + 1) * pages_per);
      seqs.push_back({static_cast<std::int32_t>(b), 1, static_cast<std::int32_t>(c.ctx + 1),
                      std::span<const std::int32_t>(&position, 1), tables[b]});
    }
    const MlaShape sh = V3Mla(c.heads, page);
    const double us = TimeUs([&](int) { gpu->mla().Absorbed(q, cache, kv_b, seqs, sh, out); });
    const double bytes = static_cast<double>(c.batch) * (c.ctx + 1) * 576 * 2;
    std::printf("RESULT decode_mla_b%lld_ctx%lld_h%lld %.1f %.0f GB/s\n", static_cast<long long>(c.batch),
                static_cast<long long>(c.ctx), static_cast<long long>(c.heads), us, bytes / (us * 1e-6) / 1e9);
    std::fflush(stdout);
  }
}

// Ceiling: a large device-to-device copy (bytes read + written).
void BenchCopy() {
  const std::size_t bytes = 4ull << 30;
  void *a, *b;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&b, bytes));
  BENCH_CUDA(cudaMemset(a, 1, bytes));
  const double us = TimeUs([&](int) {
    BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, gpu->context().stream()));
  });
  std::printf("RESULT hbm_copy_4GiB %.1f %.0f GB/s\n", us, 2.0 * bytes / (us * 1e-6) / 1e9);
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(b));
}

// Device sampling against the host path for 1 and 64 rows of 129280 logits. "peaked" rows (normal
// logits × 8) keep top_p's nucleus small, as a trained model's usually is; "flat" rows (× 1) put it
// past the kernel's gathered path.
void BenchSample() {
  const std::int64_t vocab = 129280;
  struct Kind {
    const char* name;
    float scale;
    SamplingRow row;
  };
  SamplingRow greedy, plain, top_k, top_p, all;
  greedy.temperature = 0.0;
  top_k.top_k = 50;
  top_p.top_p = 0.95;
  all.top_k = 50;
  all.top_p = 0.9;
  all.min_p = 0.05;
  all.want_logprob = true;
  all.top_logprobs = 5;
  for (const Kind& kind : {Kind{"greedy", 8.0f, greedy}, Kind{"temperature", 8.0f, plain}, Kind{"top_k50", 8.0f, top_k},
                           Kind{"top_p_peaked", 8.0f, top_p}, Kind{"top_p_flat", 1.0f, top_p},
                           Kind{"top_k_p_min_p_logprobs", 8.0f, all}}) {
    for (std::int64_t rows : {1, 64}) {
      std::mt19937 rng(11);
      Buffer logits = RandomDevice(DType::kF32, Shape{rows, vocab}, kind.scale, rng);
      std::vector<SamplingRow> params(rows, kind.row);
      for (std::int64_t i = 0; i < rows; ++i) {
        params[i].row = i;
        params[i].seed = 1234 + i;
      }
      std::vector<SampledToken> out(rows);
      const double device_us = TimeUs([&](int) { gpu->Sample(logits, params, out); }, 2, 7);
      std::vector<float> host(rows * vocab);
      HostSamplingScratch scratch;
      std::vector<double> host_times;
      for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        gpu->CopyToHost(logits, host.data());
        for (std::int64_t i = 0; i < rows; ++i) out[i] = SampleOnHost(host.data() + i * vocab, vocab, params[i], scratch);
        host_times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(host_times.begin(), host_times.end());
      std::printf("RESULT sample_%s_r%lld %.1f %.2f Mrows/s\n", kind.name, static_cast<long long>(rows), device_us,
                  rows / device_us);
      std::printf("RESULT sample_host_%s_r%lld %.1f %.2f Mrows/s\n", kind.name, static_cast<long long>(rows),
                  host_times[1], rows / host_times[1]);
      std::fflush(stdout);
    }
  }
}

// The operation table's perf mode: the launch alone is timed (inputs were copied when the case was
// prepared); in-place cases rewrite their own inputs, which does not change their cost.
void BenchOpTable() {
  constexpr int kScale = 16;
  for (const fission::testing::OpCase& c : fission::testing::OpCases()) {
    std::mt19937_64 rng(5);
    const fission::testing::Tensors in = c.inputs(rng, kScale);
    fission::testing::PreparedCase p = c.prepare(*gpu, in);
    const double us = TimeUs([&](int) { p.launch(); });
    const double bytes = c.bytes(in), flops = c.flops(in);
    const double gbs = bytes / (us * 1e-6) / 1e9, tflops = flops / (us * 1e-6) / 1e12;
    const double ceiling = c.name == "linear_fp8" || c.name == "moe_experts_fp8" ? 1300.0 : 67.0;
    std::printf("RESULT op_%s %.2f %.1f GB/s  %.2f TFLOP/s  (%.1f%% of HBM, %.1f%% of %.0f TFLOP/s)\n", c.name.c_str(),
                us, gbs, tflops, 100.0 * gbs / 4200.0, 100.0 * tflops / ceiling, ceiling);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace fission::kernels::cuda

int main(int argc, char** argv) {
  using namespace fission::kernels::cuda;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("no CUDA device present\n");
    return 0;
  }
  gpu = new CudaBackend(0);
  auto want = [&](const char* what) {
    if (argc == 1) return true;
    for (int i = 1; i < argc; ++i)
      if (std::strcmp(argv[i], what) == 0) return true;
    return false;
  };
  if (want("copy")) BenchCopy();
  if (want("gemm")) BenchGemm(false);
  if (want("fp8")) BenchGemm(true);
  if (want("prefill")) BenchPrefill();
  if (want("decode")) BenchDecode();
  if (want("moe_fp8")) BenchMoeFp8();
  for (const auto& [mode, codes] : {std::pair{"moe_mxfp4", fission::DType::kF4E2M1},
                                    std::pair{"moe_mxfp8", fission::DType::kF8E4M3}})
    if (want(mode))
      fission::bench::BenchMoeMx(*gpu, codes, [](const std::function<void(int)>& fn) { return TimeUs(fn); });
  if (want("moe_fp4"))
    fission::bench::BenchMoeFp4(*gpu, [](const std::function<void(int)>& fn) { return TimeUs(fn); });
  if (want("sample")) BenchSample();
  if (want("ops")) BenchOpTable();
  fission::bench::RunDsaBenchmarks(*gpu, want);
  return 0;
}
