// Dense Linear through cuBLASLt: bf16 weights take bf16 activations (fp32 activations are converted
// first) and write bf16 or fp32; fp32 weights run an fp32 GEMM (full fp32 arithmetic, no TF32).
// Up to 8 tokens on bf16 weights take the tensor-core GEMV of gemv_bf16.cu instead, and up to
// kDeviceRoutedTokens on fp32 weights (fp32 activations) the GEMV of gemv_f32.cu; more tokens on
// narrow fp32 weights the tiled kernel of gemm_f32.cu.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace fission::kernels::cuda {

void Linear(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out) {
  FISSION_CHECK(w.rank() == 2, "Linear weight must be 2-D, got ", w.shape.ToString());
  const std::int64_t m = w.shape[0], k = w.shape[1];
  const std::int64_t n = x.numel() / k;
  FISSION_CHECK(x.rank() >= 1 && x.shape[-1] == k && out.numel() == n * m, "Linear shapes x", x.shape.ToString(),
                " w", w.shape.ToString(), " out", out.shape.ToString());
  if (n == 0) return;
  const DType compute = w.dtype;
  FISSION_CHECK(compute == DType::kBF16 || compute == DType::kF32, "Linear weight dtype ", DTypeName(w.dtype),
                " (FP8 weights go through LinearFp8)");
  if (Bf16GemvTakes(x, w, out)) return Bf16Gemv(ctx, x, w, out);
  if (F32GemvTakes(x, w, out)) return F32Gemv(ctx, x, w, out);
  if (F32GemmTakes(x, w, out)) return F32Gemm(ctx, x, w, out);
  // Activations in the weight's dtype.
  Buffer x_conv;
  const Tensor* xa = &x;
  if (x.dtype != compute) {
    x_conv = Buffer(compute, Shape{n, k}, ctx.allocator());
    Convert(ctx, x, x_conv);
    xa = &x_conv.tensor();
  }
  // fp32 GEMMs write fp32; a bf16 output of an fp32 GEMM goes through a scratch buffer.
  Buffer out_tmp;
  const Tensor* o = &out;
  if (compute == DType::kF32 && out.dtype != DType::kF32) {
    out_tmp = Buffer(DType::kF32, Shape{n, m}, ctx.allocator());
    o = &out_tmp.tensor();
  }
  const int type = compute == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  GemmDesc g;
  g.trans_a = true;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = w.data;
  g.a_type = type;
  g.lda = k;
  g.b = xa->data;
  g.b_type = type;
  g.ldb = k;
  g.d = o->data;
  g.d_type = o->dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  g.ldd = m;
  FISSION_CHECK(ctx.Gemm(g), "cuBLASLt has no algorithm for Linear ", n, "x", m, "x", k, " ", DTypeName(compute));
  if (o != &out) Convert(ctx, *o, out);
}

}  // namespace fission::kernels::cuda
