// MX routed experts' benchmark (moe_mx_bench.cc), run by fission_cuda_bench's moe_mxfp4 and moe_mxfp8
// modes.
#pragma once

#include <functional>

#include "tensor/dtype.h"

namespace fission::kernels::cuda {
class CudaBackend;
}

namespace fission::bench {

// Median microseconds of fn(repetition) (cuda_bench.cc's TimeUs).
using TimeFn = std::function<double(const std::function<void(int)>&)>;
// codes: DType::kF4E2M1 (MXFP4) or DType::kF8E4M3 (MXFP8).
void BenchMoeMx(kernels::cuda::CudaBackend& gpu, DType codes, const TimeFn& time_us);

}  // namespace fission::bench
