// Helpers for the CUDA-versus-CPU operation tests: random host data, device tensors, poisoned
// outputs and the relative error ‖got − ref‖ / ‖ref‖ (NaN or an unwritten output never passes).
//
// Error bounds, per path (the CPU reference gets the same bf16-rounded inputs, so a bound measures
// the computation only):
//   fp32 elementwise and copies ........ 1e-6   (same arithmetic, libm vs CUDA math ulps)
//   fp32 GEMM (cuBLASLt, no TF32) ...... 1e-5   (summation order)
//   bf16 GEMM, bf16 outputs ............ 1e-2   (bf16 rounding of products' inputs/outputs)
//   FP8 block-scaled GEMM .............. 1e-2   (identical codes; fp32 sums, bf16 output)
//   MLA attention (bf16 tensor cores) .. 2e-2   (q, keys, values and P rounded to bf16)
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <functional>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda::testing {

inline constexpr double kF32Elementwise = 1e-6;
inline constexpr double kF32Gemm = 1e-5;
inline constexpr double kBf16 = 1e-2;
inline constexpr double kFp8 = 1e-2;
inline constexpr double kAttention = 2e-2;

// True when a CUDA device is present; otherwise the test binary reports it and every test skips.
bool HaveDevice();
CudaBackend& Gpu();
Backend& Cpu();

std::vector<float> Random(std::int64_t n, std::mt19937& rng, float scale = 1.0f);
// Values rounded to bf16, so the CPU reference sees exactly what a bf16 device tensor holds.
std::vector<float> RoundBf16(std::vector<float> v);

// A device tensor holding `values` (converted to dtype).
Buffer ToDevice(DType dtype, Shape shape, const std::vector<float>& values);
// A device tensor filled with NaN (the poisoned output).
Buffer Poisoned(DType dtype, Shape shape);
std::vector<float> ToHost(const Tensor& t);
// A host tensor view of `dtype` over `data`, and the fp32 one over `values`.
Tensor HostTensor(void* data, DType dtype, Shape shape);
Tensor HostView(std::vector<float>& values, Shape shape);

// Weight views for an experts operation: plain matrices, or FP8 codes with their 128×128 block scales.
std::vector<WeightView> PlainWeights(const std::vector<Tensor>& values);
std::vector<WeightView> Fp8Weights(const std::vector<Tensor>& codes, const std::vector<Tensor>& scales);

double RelErr(const std::vector<float>& got, const std::vector<float>& ref);
// Whether two results are equal to the bit (a graph replay against the eager call).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b);

// `m` added to the context's input mirrors for the scope's lifetime (spans inside it resolve to
// its device copy, as inside a step's input block).
struct MirrorScope {
  CudaContext& ctx;
  const char* host;
  MirrorScope(CudaContext& c, const InputMirror& m) : ctx(c), host(m.host) { ctx.AddInputMirror(m); }
  ~MirrorScope() { ctx.RemoveInputMirror(host); }
};

// `run` captured on the device's stream as a CUDA graph (the capture aborted if it throws),
// launched by Launch, destroyed with the pinned constants the capture kept. During the capture
// spans inside `inputs` resolve to its device copy.
class CapturedGraph {
 public:
  CapturedGraph(CudaContext& ctx, const std::function<void()>& run, const InputMirror& inputs = {});
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  void Launch();
  // Whether the capture uploaded constants (a decode path must not).
  bool uploaded_constants() const { return !pinned_.empty(); }

 private:
  CudaContext& ctx_;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<void*> pinned_;
};

}  // namespace fission::kernels::cuda::testing

#define FISSION_REQUIRE_GPU()                                             \
  do {                                                                    \
    if (!::fission::kernels::cuda::testing::HaveDevice())                 \
      GTEST_SKIP() << "no CUDA device present (this binary needs a GPU)"; \
  } while (0)
