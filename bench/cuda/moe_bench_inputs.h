// Inputs the routed-experts benchmarks share (moe_mx_bench.cc, moe_fp4_bench.cc): a routing of n
// tokens and random bf16 activations on the device.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>

#include "bench/cuda/moe_mx_bench.h"  // TimeFn
#include "kernels/cuda/cuda_backend.h"

namespace fission::bench {

struct ExpertRouting {
  Buffer ids, weights;   // I32 [n, top_k], F32 [n, top_k]
  std::int64_t active = 0;  // experts with at least one token
};
// Distinct experts per token, uniform over all of them, ids ascending, weights in [0.05, 0.5).
ExpertRouting MakeExpertRouting(kernels::cuda::CudaBackend& gpu, std::int64_t n, std::int64_t experts,
                                std::int64_t top_k, std::mt19937& rng);
// Standard-normal values in a bf16 device tensor.
Buffer RandomBf16(kernels::cuda::CudaBackend& gpu, Shape shape, std::mt19937& rng);
// Uniform values of unit variance in a bf16 device tensor, drawn on the device (for the prefill
// benchmarks' hundreds of millions of values).
Buffer UniformBf16(kernels::cuda::CudaBackend& gpu, Shape shape, std::uint64_t seed);

// `RESULT <name> <us> <TFLOP/s> TFLOP/s` and `INFO <name> <fraction> of 790 TFLOP/s` (the H200's
// measured bf16 ceiling) for `flops` done in `us`.
void PrintTflops(const std::string& name, double us, double flops);

// The whole experts operation (Backend::MoeExperts) at 1, 64 and 4,096 tokens, each timed over
// `routings` routings by `time_us` (called with the repetition's index); prints
// `RESULT <name>_n<N> <us> <GB/s>` and `INFO <name>_n<N> <fraction of 4.8 TB/s>`, the bytes being
// those of the active experts (`expert_bytes` each).
void BenchWholeExperts(kernels::cuda::CudaBackend& gpu, const TimeFn& time_us,
                       const std::string& name, std::int64_t experts, std::int64_t top_k, std::int64_t hidden,
                       std::span<const WeightView> gate_up, std::span<const WeightView> down, double expert_bytes,
                       int routings, std::mt19937& rng);

}  // namespace fission::bench
