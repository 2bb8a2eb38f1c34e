// Inputs the routed-experts benchmarks share (moe_mx_bench.cc, moe_fp4_bench.cc): a routing of n
// tokens and random bf16 activations on the device.
#pragma once

#include <cstdint>
#include <random>

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

}  // namespace fission::bench
