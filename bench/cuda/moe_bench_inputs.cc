#include "bench/cuda/moe_bench_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace fission::bench {

ExpertRouting MakeExpertRouting(kernels::cuda::CudaBackend& gpu, std::int64_t n, std::int64_t experts,
                                std::int64_t top_k, std::mt19937& rng) {
  std::vector<float> ids, weights;
  std::vector<bool> used(static_cast<std::size_t>(experts), false);
  std::vector<std::int32_t> pool(static_cast<std::size_t>(experts));
  for (std::int64_t e = 0; e < experts; ++e) pool[e] = static_cast<std::int32_t>(e);
  std::uniform_real_distribution<float> u(0.05f, 0.5f);
  for (std::int64_t t = 0; t < n; ++t) {
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<std::int32_t> chosen(pool.begin(), pool.begin() + top_k);
    std::sort(chosen.begin(), chosen.end());
    for (std::int32_t e : chosen) {
      ids.push_back(static_cast<float>(e));
      weights.push_back(u(rng));
      used[e] = true;
    }
  }
  ExpertRouting r{Buffer(DType::kI32, Shape{n, top_k}, gpu.allocator()),
                  Buffer(DType::kF32, Shape{n, top_k}, gpu.allocator())};
  gpu.CopyFromHost(ids.data(), r.ids);
  gpu.CopyFromHost(weights.data(), r.weights);
  r.active = std::count(used.begin(), used.end(), true);
  return r;
}

Buffer RandomBf16(kernels::cuda::CudaBackend& gpu, Shape shape, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(shape.numel());
  for (float& x : v) x = normal(rng);
  Buffer b(DType::kBF16, shape, gpu.allocator());
  gpu.CopyFromHost(v.data(), b);
  return b;
}

Buffer UniformBf16(kernels::cuda::CudaBackend& gpu, Shape shape, std::uint64_t seed) {
  Buffer b(DType::kBF16, shape, gpu.allocator());
  gpu.FillUniform(b, std::sqrt(3.0f), seed);
  return b;
}

void PrintTflops(const std::string& name, double us, double flops) {
  constexpr double kCeilingTflops = 790.0;
  const double tflops = flops / (us * 1e-6) / 1e12;
  std::printf("RESULT %s %.1f %.1f TFLOP/s\n", name.c_str(), us, tflops);
  std::printf("INFO %s %.3f of 790 TFLOP/s\n", name.c_str(), tflops / kCeilingTflops);
  std::fflush(stdout);
}

void BenchWholeExperts(kernels::cuda::CudaBackend& gpu, const TimeFn& time_us,
                       const std::string& name, std::int64_t experts, std::int64_t top_k, std::int64_t hidden,
                       std::span<const WeightView> gate_up, std::span<const WeightView> down, double expert_bytes,
                       int routings, std::mt19937& rng) {
  constexpr double kHbmGBs = 4800.0;
  for (std::int64_t n : {1, 64, 4096}) {
    std::vector<ExpertRouting> drawn;
    double active = 0;
    for (int r = 0; r < routings; ++r) {
      drawn.push_back(MakeExpertRouting(gpu, n, experts, top_k, rng));
      active += static_cast<double>(drawn.back().active) / routings;
    }
    const Buffer x = RandomBf16(gpu, Shape{n, hidden}, rng);
    Buffer out(DType::kF32, Shape{n, hidden}, gpu.allocator());
    const double us = time_us([&](int i) {
      const ExpertRouting& r = drawn[i % routings];
      gpu.MoeExperts(x, r.ids, r.weights, gate_up, down, out);
    });
    const double gbs = active * expert_bytes / (us * 1e-6) / 1e9;
    std::printf("RESULT %s_n%lld %.1f %.0f GB/s\n", name.c_str(), static_cast<long long>(n), us, gbs);
    std::printf("INFO %s_n%lld %.3f of 4.8 TB/s, %.1f active experts\n", name.c_str(), static_cast<long long>(n),
                gbs / kHbmGBs, active);
    std::fflush(stdout);
  }
}

}  // namespace fission::bench
