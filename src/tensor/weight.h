// A weight matrix as the operations take it: its values together with the format they are stored
// in. A plain weight (fp32, bf16) is one tensor. A block-quantized weight is codes plus one scale
// per block of block_rows x block_cols values: value = code * scale of its block (DeepSeek-V3's
// FP8 checkpoints: e4m3 codes with fp32 scales per 128x128; MXFP4: e2m1 codes, two per byte, with
// e8m0 scales per 1x32). Backends dispatch on the format inside one Linear and one experts
// operation, so a new format is a new case there, not a new operation. How each format is
// quantized, and how its products quantize their activations (or, for a weight-only format, take
// them as they are), is tensor/quantize.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fission {

struct WeightFormat {
  DType values = DType::kF32;  // the element type of the values, or of their codes
  DType scales = DType::kF32;  // the scales' element type; meaningful when quantized()
  std::int32_t block_rows = 0;  // 0: not block-quantized
  std::int32_t block_cols = 0;
  // The products' activations when they do not follow the format's own rule (tensor/quantize.h):
  // 0 for the format's rule; otherwise e4m3 per 1 x this many values with power-of-two (ue8m0)
  // scales. Set only by Mxfp4A8, whose storage is Mxfp4's.
  std::int32_t e4m3_act_block = 0;

  bool quantized() const { return block_rows > 0; }
  bool operator==(const WeightFormat&) const = default;
  // "F32", "BF16", "F8_E4M3 128x128 F32 scales", "F4 1x32 F8_E8M0 scales, e4m3 1x128 activations", ...
  std::string Name() const;

  // block_cols of a format with one scale per row, whatever the row's length (per channel).
  static constexpr std::int32_t kWholeRow = 0x7fffffff;

  static WeightFormat Plain(DType dtype) { return {dtype, DType::kF32, 0, 0, 0}; }
  // DeepSeek-V3's checkpoint format: e4m3 codes, fp32 scales per 128x128 block.
  static WeightFormat Fp8Block128() { return {DType::kF8E4M3, DType::kF32, 128, 128, 0}; }
  // e4m3 codes with one fp32 scale per output channel (row): ATOM's ptpc_fp8 weights.
  static WeightFormat Fp8PerChannel() { return {DType::kF8E4M3, DType::kF32, 1, kWholeRow, 0}; }
  // OCP microscaling: e4m3 (MXFP8) or e2m1 (MXFP4, two per byte) codes with one e8m0 scale per
  // 32 consecutive values of a row.
  static WeightFormat Mxfp8() { return {DType::kF8E4M3, DType::kE8M0, 1, 32, 0}; }
  static WeightFormat Mxfp4() { return {DType::kF4E2M1, DType::kE8M0, 1, 32, 0}; }
  // MXFP4 storage (as Mxfp4) whose products take e4m3 activations per 1x128 with ue8m0 scales
  // (W4A8): DeepSeek-V4's FP4 routed experts, whose reference quantizes a product's input as it
  // does for its FP8 weights (act_quant, 128 values a block) and multiplies in mixed precision.
  static WeightFormat Mxfp4A8() { return {DType::kF4E2M1, DType::kE8M0, 1, 32, 128}; }
};

// A non-owning view of a weight [rows, cols] and its scales [ceil(rows / block_rows),
// ceil(cols / block_cols)] (no scales when plain).
struct WeightView {
  WeightView() = default;
  // A plain weight: the tensor's own dtype.
  WeightView(const Tensor& plain) : values(plain), format(WeightFormat::Plain(plain.dtype)) {}  // NOLINT
  WeightView(const Tensor& codes, const Tensor& block_scales, WeightFormat f)
      : values(codes), scales(block_scales), format(f) {}

  Tensor values;
  Tensor scales;
  WeightFormat format;

  std::int64_t rows() const { return values.shape[0]; }
  std::int64_t cols() const { return values.shape[1]; }
  // An Error naming `what` unless the shapes fit the format (2-D values of the format's dtype,
  // scales of the block grid's shape and dtype).
  void Check(const char* what) const;
};

// The one format every weight of `a` and `b` has (a set of experts' projections); an Error
// naming `what` when they differ or are empty.
WeightFormat CommonFormat(std::span<const WeightView> a, std::span<const WeightView> b, const char* what);
// The values (and scales) tensors of a set of weights, for kernels that take them apart.
std::vector<Tensor> ValuesOf(std::span<const WeightView> weights);
std::vector<Tensor> ScalesOf(std::span<const WeightView> weights);

}  // namespace fission
