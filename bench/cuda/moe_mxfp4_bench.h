// MXFP4 routed experts' benchmark (moe_mxfp4_bench.cc), run by fission_cuda_bench's moe_mxfp4 mode.
#pragma once

#include <functional>

namespace fission::kernels::cuda {
class CudaBackend;
}

namespace fission::bench {

// Median microseconds of fn(repetition) (cuda_bench.cc's TimeUs).
using TimeFn = std::function<double(const std::function<void(int)>&)>;
void BenchMoeMxfp4(kernels::cuda::CudaBackend& gpu, const TimeFn& time_us);

}  // namespace fission::bench
