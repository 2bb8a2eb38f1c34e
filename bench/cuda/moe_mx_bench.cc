// MXFP4 and MXFP8 routed experts at DeepSeek-V3's shapes (hidden 7168, moe_intermediate 2048, 256
// experts, top-8, balanced random routing, bf16 activations), `fission_cuda_bench moe_mxfp4` and
// `moe_mxfp8` (FMT below):
//   moe_FMT_gemv_{gate_up,down}_n{1,64}: one GEMV over the run list alone (plan and activations
//     prepared once per routing), GB/s of the codes and scales of every expert with a token,
//     counted once, and that as a fraction of the H200's 4.8 TB/s;
//   moe_FMT_v3_n{1,64,4096}: the whole operation (plan, quantizations, both GEMVs, silu, combine).
// Four routings are rotated so that an expert set read in one repetition is not in L2 at the next
// (8 experts' gate_up are 125 MB, past the 60 MB L2).
#include "bench/cuda/moe_mx_bench.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "bench/cuda/moe_bench_inputs.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_ops.h"

namespace fission::bench {
namespace {

using kernels::cuda::CudaBackend;
constexpr std::int64_t kHidden = 7168, kInter = 2048, kExperts = 256, kTopK = 8;
constexpr double kHbmGBs = 4800.0;
constexpr int kRoutings = 4;

struct Weights {
  std::vector<Buffer> codes, scales;
  std::vector<Tensor> codes_t, scales_t;
  std::vector<WeightView> views;
  double bytes = 0;  // one expert's codes and scales
};

// Random codes (every byte is two valid e2m1 codes; e4m3's NaN codes replaced) and one scale 2^-7
// for every 1x32.
Weights MakeWeights(CudaBackend& gpu, DType codes, std::int64_t m, std::int64_t k, std::mt19937& rng) {
  Weights w;
  const WeightFormat format = codes == DType::kF4E2M1 ? WeightFormat::Mxfp4() : WeightFormat::Mxfp8();
  std::vector<std::uint8_t> bytes(DTypeBytes(codes, m * k)), scales(m * ((k + 31) / 32), 120);
  for (std::uint8_t& b : bytes) {
    b = static_cast<std::uint8_t>(rng());
    if (codes == DType::kF8E4M3 && (b & 0x7F) == 0x7F) b ^= 1;
  }
  for (std::int64_t e = 0; e < kExperts; ++e) {
    // Rotate the pool so experts differ without drawing 6 GB of random bytes.
    std::rotate(bytes.begin(), bytes.begin() + 4093, bytes.end());
    w.codes.emplace_back(codes, Shape{m, k}, gpu.allocator());
    w.scales.emplace_back(DType::kE8M0, Shape{m, (k + 31) / 32}, gpu.allocator());
    gpu.CopyBytesFromHost(bytes.data(), w.codes.back());
    gpu.CopyBytesFromHost(scales.data(), w.scales.back());
  }
  for (std::int64_t e = 0; e < kExperts; ++e) {
    w.codes_t.push_back(w.codes[e]);
    w.scales_t.push_back(w.scales[e]);
    w.views.emplace_back(w.codes[e], w.scales[e], format);
  }
  w.bytes = static_cast<double>(bytes.size() + scales.size());
  return w;
}

}  // namespace

void BenchMoeMx(CudaBackend& gpu, DType codes, const TimeFn& time_us) {
  kernels::cuda::CudaContext& ctx = gpu.context();
  const char* fmt = codes == DType::kF4E2M1 ? "mxfp4" : "mxfp8";
  std::mt19937 rng(12);
  const Weights gu = MakeWeights(gpu, codes, 2 * kInter, kHidden, rng),
                down = MakeWeights(gpu, codes, kHidden, kInter, rng);
  const void* const* gu_table = ctx.PointerTable(gu.codes_t, gu.scales_t, "bench gate_up");
  const void* const* down_table = ctx.PointerTable(down.codes_t, down.scales_t, "bench down");

  for (std::int64_t n : {1, 64}) {
    // Per routing: the plan, the quantized tokens (gate_up's input) and a quantized intermediate.
    struct Prepared {
      ExpertRouting routing;
      kernels::cuda::ExpertRows rows;
      kernels::cuda::MxInput x, act;
      Buffer gu_out, down_out;
    };
    std::vector<Prepared> prep;
    const Buffer x = RandomBf16(gpu, Shape{n, kHidden}, rng);
    double active = 0;
    for (int r = 0; r < kRoutings; ++r) {
      Prepared p;
      p.routing = MakeExpertRouting(gpu, n, kExperts, kTopK, rng);
      active += static_cast<double>(p.routing.active) / kRoutings;
      p.rows = kernels::cuda::PermuteByExpertOnDevice(ctx, p.routing.ids, kExperts);
      p.x = kernels::cuda::QuantizeMx(ctx, codes, x, p.rows.token_of_row.ptr<std::int32_t>(), p.rows.pairs);
      const Buffer act = RandomBf16(gpu, Shape{p.rows.pairs, kInter}, rng);
      p.act = kernels::cuda::QuantizeMx(ctx, codes, act, nullptr, p.rows.pairs);
      p.gu_out = Buffer(DType::kF32, Shape{p.rows.pairs, 2 * kInter}, gpu.allocator());
      p.down_out = Buffer(DType::kF32, Shape{p.rows.pairs, kHidden}, gpu.allocator());
      prep.push_back(std::move(p));
    }
    for (const bool is_gu : {true, false}) {
      const double us = time_us([&](int i) {
        Prepared& p = prep[i % kRoutings];
        if (is_gu)
          kernels::cuda::MxGemvRuns(ctx, p.x, p.rows.runs.ptr<kernels::cuda::ExpertRun>(),
                                    p.rows.run_count.ptr<std::int32_t>(), p.rows.max_runs, gu_table,
                                    gu_table + kExperts, 2 * kInter, kHidden, p.gu_out);
        else
          kernels::cuda::MxGemvRuns(ctx, p.act, p.rows.runs.ptr<kernels::cuda::ExpertRun>(),
                                    p.rows.run_count.ptr<std::int32_t>(), p.rows.max_runs, down_table,
                                    down_table + kExperts, kHidden, kInter, p.down_out);
      });
      const double gbs = active * (is_gu ? gu.bytes : down.bytes) / (us * 1e-6) / 1e9;
      std::printf("RESULT moe_%s_gemv_%s_n%lld %.1f %.0f GB/s\n", fmt, is_gu ? "gate_up" : "down",
                  static_cast<long long>(n), us, gbs);
      std::printf("INFO moe_%s_gemv_%s_n%lld %.3f of 4.8 TB/s, %.1f active experts\n", fmt,
                  is_gu ? "gate_up" : "down", static_cast<long long>(n), gbs / kHbmGBs, active);
      std::fflush(stdout);
    }
  }

  BenchWholeExperts(gpu, time_us, std::string("moe_") + fmt + "_v3", kExperts, kTopK, kHidden, gu.views, down.views,
                    gu.bytes + down.bytes, kRoutings, rng);
}

}  // namespace fission::bench
