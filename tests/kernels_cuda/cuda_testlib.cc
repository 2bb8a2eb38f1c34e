#include "kernels_cuda/cuda_testlib.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace fission::kernels::cuda::testing {

bool HaveDevice() {
  static const bool have = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return have;
}

CudaBackend& Gpu() {
  static CudaBackend* backend = new CudaBackend(0);  // lives to process exit
  return *backend;
}

Backend& Cpu() {
  static std::unique_ptr<Backend> backend = MakeCpuBackend();
  return *backend;
}

std::vector<float> Random(std::int64_t n, std::mt19937& rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<float> RoundBf16(std::vector<float> v) {
  for (float& x : v) x = Bf16ToF32(F32ToBf16(x));
  return v;
}

Buffer ToDevice(DType dtype, Shape shape, const std::vector<float>& values) {
  Buffer b(dtype, shape, Gpu().allocator());
  EXPECT_EQ(static_cast<std::int64_t>(values.size()), shape.numel());
  Gpu().CopyFromHost(values.data(), b);
  return b;
}

Buffer Poisoned(DType dtype, Shape shape) {
  std::vector<float> nan(shape.numel(), std::numeric_limits<float>::quiet_NaN());
  return ToDevice(dtype, shape, nan);
}

std::vector<float> ToHost(const Tensor& t) {
  std::vector<float> v(t.numel());
  Gpu().CopyToHost(t, v.data());
  return v;
}

Tensor HostTensor(void* data, DType dtype, Shape shape) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.device = Device::Cpu();
  return t;
}

Tensor HostView(std::vector<float>& values, Shape shape) { return HostTensor(values.data(), DType::kF32, std::move(shape)); }

double RelErr(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    const double d = static_cast<double>(got[i]) - ref[i];
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

std::vector<WeightView> PlainWeights(const std::vector<Tensor>& values) {
  return std::vector<WeightView>(values.begin(), values.end());
}

std::vector<WeightView> Fp8Weights(const std::vector<Tensor>& codes, const std::vector<Tensor>& scales) {
  std::vector<WeightView> out;
  for (std::size_t e = 0; e < codes.size(); ++e) out.emplace_back(codes[e], scales[e], WeightFormat::Fp8Block128());
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

CapturedGraph::CapturedGraph(CudaContext& ctx, const std::function<void()>& run, const InputMirror& inputs)
    : ctx_(ctx) {
  ctx.BeginCapture(inputs);
  try {
    run();
  } catch (...) {
    ctx.AbortCapture();
    throw;
  }
  cudaGraph_t graph = ctx.EndCapture(&pinned_);
  const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
  (void)cudaGraphDestroy(graph);
  FISSION_CHECK(err == cudaSuccess, "cudaGraphInstantiate: ", cudaGetErrorString(err));
}

CapturedGraph::~CapturedGraph() {
  (void)cudaStreamSynchronize(ctx_.stream());
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
  for (void* p : pinned_) (void)cudaFreeHost(p);
}

void CapturedGraph::Launch() { FISSION_CHECK(cudaGraphLaunch(exec_, ctx_.stream()) == cudaSuccess, "cudaGraphLaunch"); }

}  // namespace fission::kernels::cuda::testing
