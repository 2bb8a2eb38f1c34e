// DeepSeek-V4-Flash's FP4 routed experts (WeightFormat::Mxfp4A8, moe_fp4.cu) at its shapes (hidden
// 4096, moe_intermediate 2048 on one GPU and 256 a rank at TP 8, 256 experts, top-6, balanced
// random routing, activations quantized to e4m3 per 1x128), `fission_cuda_bench moe_fp4`:
//   moe_fp4_gemv_{gate_up,down}_n{1,64}: one GEMV over the run list alone (plan and quantized
//     inputs prepared once per routing), GB/s of the codes and scales of every expert with a token,
//     counted once, and that as a fraction of the H200's 4.8 TB/s; _tp8 the down projection of a
//     TP-8 rank (k = 256: two warps a tile);
//   moe_fp4_v4_n{1,64,4096}: the whole operation (plan, gather, both products, silu, combine; at
//     4,096 tokens the products are the grouped GEMM);
//   moe_fp4_gemm_{gate_up,down}_n{4096,16384}: the prefill's grouped GEMM (moe_grouped.cu) alone
//     over 128-row runs planned once per routing, `RESULT <name> <us> <TFLOP/s> TFLOP/s` and INFO
//     the fraction of 790 TFLOP/s (the H200's bf16 ceiling; e4m3 mma.sync measured 1,623);
//   moe_fp4_v4_prefill_{grouped,gemv}_n{4096,16384}: the whole operation on the grouped GEMM and on
//     the 8-row GEMV it replaced (ExpertsPrefill::kPerExpert), the same line format; FLOPs 2 per
//     multiply-add: 6·pairs·hidden·inter for the operation.
// Four routings are rotated so that an expert set read in one repetition is not in L2 at the next
// (two at the prefill sizes).
#include "bench/cuda/moe_fp4_bench.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/cuda/moe_bench_inputs.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"

namespace fission::bench {
namespace {

using kernels::cuda::CudaBackend;
constexpr std::int64_t kHidden = 4096, kInter = 2048, kInterTp8 = 256, kExperts = 256, kTopK = 6;
constexpr double kHbmGBs = 4800.0;
constexpr int kRoutings = 4, kPrefillRoutings = 2;

struct Weights {
  std::vector<Buffer> codes, scales;
  std::vector<Tensor> codes_t, scales_t;
  std::vector<WeightView> views;
  double bytes = 0;  // one expert's codes and scales
};

// Random codes (every byte is two valid e2m1 codes) and one scale 2^-7 for every 1x32.
Weights MakeWeights(CudaBackend& gpu, std::int64_t m, std::int64_t k, std::mt19937& rng) {
  Weights w;
  std::vector<std::uint8_t> bytes(DTypeBytes(DType::kF4E2M1, m * k)), scales(m * (k / 32), 120);
  for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (std::int64_t e = 0; e < kExperts; ++e) {
    // Rotate the pool so experts differ without drawing gigabytes of random bytes.
    std::rotate(bytes.begin(), bytes.begin() + 4093, bytes.end());
    w.codes.emplace_back(DType::kF4E2M1, Shape{m, k}, gpu.allocator());
    w.scales.emplace_back(DType::kE8M0, Shape{m, k / 32}, gpu.allocator());
    gpu.CopyBytesFromHost(bytes.data(), w.codes.back());
    gpu.CopyBytesFromHost(scales.data(), w.scales.back());
  }
  for (std::int64_t e = 0; e < kExperts; ++e) {
    w.codes_t.push_back(w.codes[e]);
    w.scales_t.push_back(w.scales[e]);
    w.views.emplace_back(w.codes[e], w.scales[e], WeightFormat::Mxfp4A8());
  }
  w.bytes = static_cast<double>(bytes.size() + scales.size());
  return w;
}

// Prefill sizes: the grouped GEMM alone, then the whole operation on it and on the GEMV.
void BenchPrefill(CudaBackend& gpu, const TimeFn& time_us, const Weights& gu, const Weights& down,
                  const void* const* gu_table, const void* const* down_table, std::mt19937& rng) {
  kernels::cuda::CudaContext& ctx = gpu.context();
  using kernels::cuda::ExpertsPrefill;
  for (std::int64_t n : {4096, 16384}) {
    const std::int64_t pairs = n * kTopK;
    const double gu_flops = 4.0 * pairs * kHidden * kInter, down_flops = 2.0 * pairs * kHidden * kInter;
    std::vector<ExpertRouting> routings;
    std::vector<kernels::cuda::ExpertRows> plans;
    for (int r = 0; r < kPrefillRoutings; ++r) {
      routings.push_back(MakeExpertRouting(gpu, n, kExperts, kTopK, rng));
      plans.push_back(kernels::cuda::PermuteByExpertOnDevice(ctx, routings.back().ids, kExperts,
                                                             kernels::cuda::kGroupedTileRows));
    }
    // Activations drawn on the device, quantized once.
    using kernels::cuda::QuantizeFp4Input;
    const kernels::cuda::Fp4Input x = QuantizeFp4Input(ctx, UniformBf16(gpu, Shape{pairs, kHidden}, 21)),
                                  act = QuantizeFp4Input(ctx, UniformBf16(gpu, Shape{pairs, kInter}, 22));
    Buffer gu_out(DType::kF32, Shape{pairs, 2 * kInter}, gpu.allocator()),
        down_out(DType::kF32, Shape{pairs, kHidden}, gpu.allocator());
    const std::string suffix = "_n" + std::to_string(n);
    const auto gemm = [&](const kernels::cuda::Fp4Input& in, const void* const* table, std::int64_t m,
                          const Buffer& result) {
      return time_us([&](int i) {
        const kernels::cuda::ExpertRows& p = plans[i % kPrefillRoutings];
        kernels::cuda::GroupedGemmFp4(ctx, in, p.runs.ptr<kernels::cuda::ExpertRun>(),
                                      p.run_count.ptr<std::int32_t>(), p.max_runs, table, table + kExperts, m,
                                      result);
      });
    };
    PrintTflops("moe_fp4_gemm_gate_up" + suffix, gemm(x, gu_table, 2 * kInter, gu_out), gu_flops);
    PrintTflops("moe_fp4_gemm_down" + suffix, gemm(act, down_table, kHidden, down_out), down_flops);

    const Buffer tokens = UniformBf16(gpu, Shape{n, kHidden}, 23);
    Buffer out(DType::kF32, Shape{n, kHidden}, gpu.allocator());
    for (const auto& [label, prefill] :
         {std::pair{"grouped", ExpertsPrefill::kGrouped}, std::pair{"gemv", ExpertsPrefill::kPerExpert}}) {
      PrintTflops(std::string("moe_fp4_v4_prefill_") + label + suffix, time_us([&](int i) {
                    const ExpertRouting& r = routings[i % kPrefillRoutings];
                    kernels::cuda::MoeExpertsFp4(ctx, tokens, r.ids, r.weights, gu.codes_t, gu.scales_t, down.codes_t,
                                                 down.scales_t, out, 0.0f, prefill);
                  }),
                  gu_flops + down_flops);
    }
  }
}

}  // namespace

void BenchMoeFp4(CudaBackend& gpu, const TimeFn& time_us) {
  kernels::cuda::CudaContext& ctx = gpu.context();
  std::mt19937 rng(14);
  const Weights gu = MakeWeights(gpu, 2 * kInter, kHidden, rng), down = MakeWeights(gpu, kHidden, kInter, rng),
                down_tp8 = MakeWeights(gpu, kHidden, kInterTp8, rng);
  const void* const* gu_table = ctx.PointerTable(gu.codes_t, gu.scales_t, "bench gate_up");
  const void* const* down_table = ctx.PointerTable(down.codes_t, down.scales_t, "bench down");
  const void* const* tp8_table = ctx.PointerTable(down_tp8.codes_t, down_tp8.scales_t, "bench down tp8");

  for (std::int64_t n : {1, 64}) {
    struct Prepared {
      ExpertRouting routing;
      kernels::cuda::ExpertRows rows;
      kernels::cuda::Fp4Input x, act, act_tp8;
      Buffer gu_out, down_out;
    };
    std::vector<Prepared> prep;
    double active = 0;
    for (int r = 0; r < kRoutings; ++r) {
      Prepared p;
      p.routing = MakeExpertRouting(gpu, n, kExperts, kTopK, rng);
      active += static_cast<double>(p.routing.active) / kRoutings;
      p.rows = kernels::cuda::PermuteByExpertOnDevice(ctx, p.routing.ids, kExperts);
      p.x = kernels::cuda::QuantizeFp4Input(ctx, RandomBf16(gpu, Shape{p.rows.pairs, kHidden}, rng));
      p.act = kernels::cuda::QuantizeFp4Input(ctx, RandomBf16(gpu, Shape{p.rows.pairs, kInter}, rng));
      p.act_tp8 = kernels::cuda::QuantizeFp4Input(ctx, RandomBf16(gpu, Shape{p.rows.pairs, kInterTp8}, rng));
      p.gu_out = Buffer(DType::kF32, Shape{p.rows.pairs, 2 * kInter}, gpu.allocator());
      p.down_out = Buffer(DType::kF32, Shape{p.rows.pairs, kHidden}, gpu.allocator());
      prep.push_back(std::move(p));
    }
    struct Product {
      const char* name;
      const kernels::cuda::Fp4Input Prepared::*input;
      const Buffer Prepared::*output;
      const void* const* table;
      std::int64_t m;
      double bytes;
    };
    for (const Product& product : {Product{"gate_up", &Prepared::x, &Prepared::gu_out, gu_table, 2 * kInter, gu.bytes},
                                   Product{"down", &Prepared::act, &Prepared::down_out, down_table, kHidden, down.bytes},
                                   Product{"down_tp8", &Prepared::act_tp8, &Prepared::down_out, tp8_table, kHidden,
                                           down_tp8.bytes}}) {
      const double us = time_us([&](int i) {
        Prepared& p = prep[i % kRoutings];
        kernels::cuda::Fp4GemvRuns(ctx, p.*product.input, p.rows.runs.ptr<kernels::cuda::ExpertRun>(),
                                   p.rows.run_count.ptr<std::int32_t>(), p.rows.max_runs, product.table,
                                   product.table + kExperts, product.m, p.*product.output);
      });
      const double gbs = active * product.bytes / (us * 1e-6) / 1e9;
      std::printf("RESULT moe_fp4_gemv_%s_n%lld %.1f %.0f GB/s\n", product.name, static_cast<long long>(n), us, gbs);
      std::printf("INFO moe_fp4_gemv_%s_n%lld %.3f of 4.8 TB/s, %.1f active experts\n", product.name,
                  static_cast<long long>(n), gbs / kHbmGBs, active);
      std::fflush(stdout);
    }
  }

  BenchWholeExperts(gpu, time_us, "moe_fp4_v4", kExperts, kTopK, kHidden, gu.views, down.views, gu.bytes + down.bytes,
                    kRoutings, rng);
  BenchPrefill(gpu, time_us, gu, down, gu_table, down_table, rng);
}

}  // namespace fission::bench
