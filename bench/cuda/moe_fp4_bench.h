// DeepSeek-V4's FP4 (W4A8) routed experts' benchmark (moe_fp4_bench.cc), run by
// fission_cuda_bench's moe_fp4 mode.
#pragma once

#include "bench/cuda/moe_mx_bench.h"

namespace fission::bench {

void BenchMoeFp4(kernels::cuda::CudaBackend& gpu, const TimeFn& time_us);

}  // namespace fission::bench
