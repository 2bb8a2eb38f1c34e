// Block quantization of fp32 matrices into the formats of tensor/weight.h, their exact decoding,
// and the rule by which a product with a weight of each format quantizes its activations.
//
// Scales (looked up in the formats' specifications and in the engines that run them):
//   fp32 scales (Fp8Block128, Fp8PerChannel): scale = amax / 448 over the block, so the largest
//     magnitude maps to e4m3's largest finite value; a block of zeros gets scale 1.
//   e8m0 scales (Mxfp8, Mxfp4), the OCP MX v1.0 rule: X = 2^(floor(log2(amax)) - emax_elem), with
//     emax_elem the exponent of the element type's largest binade (8 for e4m3: 448 = 1.75 * 2^8;
//     2 for e2m1: 6 = 1.5 * 2^2), clamped to e8m0's range; values above the element's largest
//     finite value after scaling saturate to it. A block of zeros gets X = 2^-127 (code 0).
// Codes are value / scale rounded to nearest, ties to even, saturating (tensor/dtype.h).
// Special values: NaN and infinities do not enter amax. With fp32 scales a NaN stays NaN in its
// own element and an infinity saturates to +-448 * scale. With e8m0 scales a block holding a NaN
// gets the NaN scale (0xFF), so the whole block decodes to NaN as the MX specification says (e2m1
// has no NaN of its own); an infinity saturates.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/weight.h"

namespace fission {

// Fp8Block128, Fp8PerChannel, Mxfp8, Mxfp4 or Mxfp4A8: the formats below take (Mxfp4A8's codes
// and scales are Mxfp4's).
bool IsBlockQuantizedFormat(const WeightFormat& format);

// Host codes [rows, cols] of format.values (fp4 packed two per byte over the whole matrix, element
// r * cols + c in nibble order) and scales [ceil(rows / block_rows), ceil(cols / block_cols)].
struct QuantizedMatrix {
  Buffer codes;
  Buffer scales;
};
// Quantizes a host fp32 matrix [rows, cols] (any shape: a last partial block has its own scale).
QuantizedMatrix QuantizeMatrix(const float* w, std::int64_t rows, std::int64_t cols, const WeightFormat& format);
// out[r * cols + c] = code * scale of its block, in fp32: exact for e8m0 scales (a short code
// times a power of two), one rounding of the product for fp32 scales. `w` is on the host.
void DequantizeMatrix(const WeightView& w, float* out);

// The OCP MX shared scale of a block whose largest finite magnitude is `amax`, as an e8m0 code.
std::uint8_t MxScaleCode(float amax, int emax_elem);
// The exponent of DeepSeek's power-of-two (ue8m0) e4m3 block scale for a block whose largest
// magnitude is `amax`: ceil(log2(max(amax, 1e-4) / 448)), the smallest power of two that keeps
// the block within e4m3's range (act_quant with scale_fmt "ue8m0").
int Ue8m0Exponent(float amax);

// Activations of a product with a weight of `format`, as that product sees them: one row `x[k]`
// quantized by the format's activation rule and decoded again into `out` (which may be `x`):
//   Fp8Block128:   e4m3, one fp32 scale per 128 values (max(amax, 1e-4) / 448), as the FP8 GEMMs;
//   Fp8PerChannel: e4m3, one fp32 scale per token (max(amax, 1e-4) / 448): ptpc's per-token side;
//   Mxfp8, Mxfp4:  the weight's own MX rule per 32 values (e4m3 or e2m1 with an e8m0 scale), as
//                  ATOM's per_1x32 products and Quark's MXFP4 checkpoints (dynamic activations);
//   Mxfp4A8:       e4m3, one power-of-two scale per 128 values (Ue8m0Exponent), as DeepSeek-V4's
//                  reference quantizes the input of its FP4 experts before fp4_gemm.
void QuantizeActivations(const WeightFormat& format, const float* x, std::int64_t k, float* out);
// "e4m3 per token", ...: for logs and errors.
std::string ActivationRuleName(const WeightFormat& format);

}  // namespace fission
