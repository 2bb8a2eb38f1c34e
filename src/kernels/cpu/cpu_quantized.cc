// Linear on the block-quantized formats other than Fp8Block128 (per-channel FP8, MXFP8, MXFP4 and
// the weight-only MXFP4 of DeepSeek-V4's experts): the reference for what a device kernel of the
// format computes. The weight is decoded exactly (tensor/quantize.h), each token's activations are
// quantized by the format's rule and decoded again (a weight-only format takes them as they are, so
// its results are the dequantized plain weight's, bit for bit), and the products accumulate in fp32
// in Dot's fixed order.
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tensor/quantize.h"

namespace fission::kernels::cpu {

void LinearQuantized(const Tensor& x, const WeightView& w, const Tensor& out) {
  w.Check("Linear");
  FISSION_CHECK(x.dtype == DType::kF32 && out.dtype == DType::kF32, "LinearQuantized takes fp32 x/out");
  const std::int64_t m = w.rows(), k = w.cols(), n = x.numel() / k;
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m, "LinearQuantized shapes x", x.shape.ToString(), " w",
                w.values.shape.ToString(), " out", out.shape.ToString());
  std::vector<float> wf(static_cast<std::size_t>(m * k));
  DequantizeMatrix(w, wf.data());
#pragma omp parallel for schedule(static) if (n * m * k > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    std::vector<float> xq(static_cast<std::size_t>(k));
    QuantizeActivations(w.format, x.ptr<float>() + i * k, k, xq.data());
    for (std::int64_t j = 0; j < m; ++j) out.ptr<float>()[i * m + j] = Dot(xq.data(), wf.data() + j * k, k);
  }
}

}  // namespace fission::kernels::cpu
