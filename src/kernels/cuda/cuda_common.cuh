// Shared pieces of the CUDA backend: error checks, element access by run-time dtype, launch sizes.
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "base/error.h"
#include "tensor/tensor.h"

namespace fission::kernels::cuda {

[[noreturn]] void CudaFailed(const char* file, int line, const char* what, const char* message);
[[noreturn]] void CublasFailed(const char* file, int line, const char* what, int status);

}  // namespace fission::kernels::cuda

// Every runtime call is checked; a failure names the call and the CUDA error.
#define FISSION_CUDA(call)                                                                          \
  do {                                                                                              \
    cudaError_t fission_err_ = (call);                                                              \
    if (fission_err_ != cudaSuccess) [[unlikely]]                                                   \
      ::fission::kernels::cuda::CudaFailed(__FILE__, __LINE__, #call, cudaGetErrorString(fission_err_)); \
  } while (0)

#define FISSION_CUBLAS(call)                                                                        \
  do {                                                                                              \
    cublasStatus_t fission_st_ = (call);                                                            \
    if (fission_st_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                          \
      ::fission::kernels::cuda::CublasFailed(__FILE__, __LINE__, #call, static_cast<int>(fission_st_)); \
  } while (0)

// After every launch: launch-configuration errors surface here, asynchronous faults at the next call.
#define FISSION_LAUNCHED() FISSION_CUDA(cudaGetLastError())

namespace fission::kernels::cuda {

// Element types the kernels read and write by run-time dtype (the branch is uniform per launch).
enum class Elem : std::uint8_t { kF32 = 0, kBF16 = 1 };

inline Elem ElemOf(const Tensor& t) {
  FISSION_CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16, "CUDA op needs an fp32 or bf16 tensor, got ",
                DTypeName(t.dtype));
  return t.dtype == DType::kF32 ? Elem::kF32 : Elem::kBF16;
}

__device__ __forceinline__ float LoadF(const void* p, std::int64_t i, Elem e) {
  if (e == Elem::kF32) return static_cast<const float*>(p)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}

__device__ __forceinline__ void StoreF(void* p, std::int64_t i, Elem e, float v) {
  if (e == Elem::kF32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
}

// What LoadF gives back after StoreF(v) in an element of type e.
__device__ __forceinline__ float RoundAs(Elem e, float v) {
  return e == Elem::kF32 ? v : __bfloat162float(__float2bfloat16_rn(v));
}

// silu(gate) · up; with limit > 0 DeepSeek-V4's clamp first, the gate from above and up to
// [-limit, limit] (kernels/v4_ops.h, ClampedSwiGlu): SiluMul and the kernels that fuse it.
__device__ __forceinline__ float SiluMulOf(float g, float u, float limit) {
  if (limit > 0.0f) {
    g = fminf(g, limit);
    u = fminf(fmaxf(u, -limit), limit);
  }
  return (g / (1.0f + expf(-g))) * u;
}

// Whether a pointer allows 16-byte vector loads (and cuBLASLt's fastest kernels).
inline bool Aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// The largest grid.y (and grid.z) a launch takes.
inline constexpr std::int64_t kMaxGridY = 65535;

inline unsigned Blocks(std::int64_t n, int threads) {
  const std::int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (1 << 30) ? (1 << 30) : b));
}

}  // namespace fission::kernels::cuda
