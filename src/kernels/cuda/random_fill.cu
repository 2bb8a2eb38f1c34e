// Random fill on the device, for --load-format dummy: real-size weights are drawn where they live
// instead of on the host (tens of GB per layer would take minutes through the host). fp32 and bf16
// tensors get the values, e4m3 and e2m1 (MXFP4 codes, bound at most 6) tensors their codes.
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/e2m1.cuh"

namespace fission::kernels::cuda {
namespace {

// A counter-based generator (splitmix64 of seed and index): every element independent of the
// launch shape, so the same seed gives the same tensor.
__device__ __forceinline__ std::uint64_t Mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ float Uniform(std::uint64_t seed, std::int64_t i, float bound) {
  const std::uint64_t r = Mix(seed ^ Mix(static_cast<std::uint64_t>(i)));
  const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
  return (2.0f * u - 1.0f) * bound;
}

__global__ void FillUniformKernel(void* x, Elem e, std::int64_t n, float bound, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    StoreF(x, i, e, Uniform(seed, i, bound));
}

// e4m3 codes of uniform values (round to nearest even, saturating): FP8 dummy weights.
__global__ void FillE4M3Kernel(std::uint8_t* codes, std::int64_t n, float bound, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    codes[i] = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(Uniform(seed, i, bound), __NV_SATFINITE, __NV_E4M3));
}

// e2m1 codes of uniform values (round to nearest even, saturating), two a byte with element 2i in
// the low nibble: MXFP4 dummy weights (their e8m0 scales are set by the loader).
__global__ void FillE2M1Kernel(std::uint8_t* codes, std::int64_t bytes, float bound, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride)
    codes[i] = static_cast<std::uint8_t>(E2m1Code(Uniform(seed, 2 * i, bound)) |
                                         E2m1Code(Uniform(seed, 2 * i + 1, bound)) << 4);
}

}  // namespace

void CudaBackend::FillUniform(const Tensor& x, float bound, std::uint64_t seed) {
  FISSION_CUDA(cudaSetDevice(ctx_->device()));
  const std::int64_t n = x.numel();
  if (n == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>((n + 255) / 256, 65535));
  if (x.dtype == DType::kF8E4M3) {
    FISSION_CHECK(bound <= 448.0f, "e4m3 fill bound ", bound, " beyond the largest code");
    FillE4M3Kernel<<<blocks, 256, 0, ctx_->stream()>>>(x.ptr<std::uint8_t>(), n, bound, seed);
  } else if (x.dtype == DType::kF4E2M1) {
    FISSION_CHECK(bound <= 6.0f && n % 2 == 0, "e2m1 fill: bound ", bound, " (at most 6), ", n, " values (even)");
    FillE2M1Kernel<<<blocks, 256, 0, ctx_->stream()>>>(x.ptr<std::uint8_t>(), n / 2, bound, seed);
  } else {
    FillUniformKernel<<<blocks, 256, 0, ctx_->stream()>>>(x.data, ElemOf(x), n, bound, seed);
  }
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
