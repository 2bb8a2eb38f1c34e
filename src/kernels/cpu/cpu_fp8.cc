// FP8 e4m3 Linear with 128×128 weight block scales and 1×128 per-token activation scales, the
// reference for the CUDA backend's block-scaled GEMM.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace fission::kernels::cpu {

constexpr std::int64_t kFp8Block = 128;
constexpr float kE4M3Max = 448.0f;

void QuantizeFp8PerTokenGroup(const float* x, std::int64_t k, std::uint8_t* codes, float* scales) {
  for (std::int64_t g = 0; g * kFp8Block < k; ++g) {
    const std::int64_t begin = g * kFp8Block, end = std::min(k, begin + kFp8Block);
    float amax = 0.0f;
    for (std::int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = std::max(amax, 1e-4f) / kE4M3Max;
    scales[g] = scale;
    for (std::int64_t i = begin; i < end; ++i) codes[i] = F32ToF8E4M3(x[i] / scale);
  }
}

void LinearFp8(const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) {
  FISSION_CHECK(x.dtype == DType::kF32 && out.dtype == DType::kF32 && w.dtype == DType::kF8E4M3 &&
                    w_scale.dtype == DType::kF32,
                "LinearFp8 takes fp32 x/out, e4m3 w and fp32 w_scale");
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  const std::int64_t kb = (k + kFp8Block - 1) / kFp8Block, mb = (m + kFp8Block - 1) / kFp8Block;
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m && w_scale.numel() == mb * kb, "LinearFp8 shapes x",
                x.shape.ToString(), " w", w.shape.ToString(), " w_scale", w_scale.shape.ToString());
  // Decode the weight once: codes to fp32, scales applied per group below.
  std::vector<float> wf(static_cast<std::size_t>(m * k));
  ConvertToF32(DType::kF8E4M3, w.data, wf.data(), m * k);
  const float* ws = w_scale.ptr<float>();
#pragma omp parallel for schedule(static) if (n * m * k > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<std::uint8_t> codes(k);
    std::vector<float> xs(kb), xq(k);
    QuantizeFp8PerTokenGroup(x.ptr<float>() + i * k, k, codes.data(), xs.data());
    ConvertToF32(DType::kF8E4M3, codes.data(), xq.data(), k);
    for (std::int64_t j = 0; j < m; ++j) {
      float acc = 0.0f;
      for (std::int64_t g = 0; g < kb; ++g) {
        const std::int64_t begin = g * kFp8Block, len = std::min(kFp8Block, k - begin);
        const float part = Dot(xq.data() + begin, wf.data() + j * k + begin, len);
        acc += part * (xs[g] * ws[(j / kFp8Block) * kb + g]);
      }
      out.ptr<float>()[i * m + j] = acc;
    }
  }
}

}  // namespace fission::kernels::cpu
