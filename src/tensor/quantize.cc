#include "tensor/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"

namespace fission {
namespace {

constexpr float kE4M3Max = 448.0f;
constexpr int kE4M3Emax = 8;  // 448 = 1.75 * 2^8
constexpr int kE2M1Emax = 2;  // 6 = 1.5 * 2^2
constexpr float kActivationFloor = 1e-4f;  // the FP8 activations' amax floor (kernels/cpu/cpu_fp8.cc)

std::int64_t CeilDiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

bool MxScaled(const WeightFormat& f) { return f.scales == DType::kE8M0; }
int EmaxOf(DType values) { return values == DType::kF4E2M1 ? kE2M1Emax : kE4M3Emax; }

// The largest finite magnitude of a run and whether it holds a NaN.
struct Extent {
  float amax = 0.0f;
  bool nan = false;
  void Add(float v) {
    if (std::isnan(v)) {
      nan = true;
    } else if (std::isfinite(v)) {
      amax = std::max(amax, std::fabs(v));
    }
  }
};

// Codes of the elements of one block: a writer over the codes buffer (fp4 nibbles or bytes).
class CodeWriter {
 public:
  CodeWriter(DType dtype, void* codes) : dtype_(dtype), bytes_(static_cast<std::uint8_t*>(codes)) {}
  void Put(std::int64_t i, float scaled) {
    if (dtype_ == DType::kF4E2M1) {
      const std::uint8_t nibble = F32ToF4E2M1(scaled);
      std::uint8_t& byte = bytes_[i / 2];
      byte = (i % 2 == 0) ? static_cast<std::uint8_t>((byte & 0xF0) | nibble)
                          : static_cast<std::uint8_t>((byte & 0x0F) | (nibble << 4));
    } else {
      bytes_[i] = F32ToF8E4M3(scaled);
    }
  }

 private:
  DType dtype_;
  std::uint8_t* bytes_;
};

float CodeValue(DType dtype, const std::uint8_t* codes, std::int64_t i) {
  if (dtype == DType::kF4E2M1) return F4E2M1ToF32((i % 2 == 0) ? (codes[i / 2] & 0xF) : (codes[i / 2] >> 4));
  return F8E4M3ToF32(codes[i]);
}

// A block's scale from its extent: an fp32 value (Fp8 formats) or an e8m0 code (MX formats).
float Fp32Scale(const Extent& e) {
  const float scale = e.amax / kE4M3Max;
  return scale > 0.0f ? scale : 1.0f;
}

void CheckFormat(const WeightFormat& format, const char* what) {
  if (!IsBlockQuantizedFormat(format)) Fail(what, ": no block quantization for weights of format ", format.Name());
}

}  // namespace

bool IsBlockQuantizedFormat(const WeightFormat& f) {
  return f == WeightFormat::Fp8Block128() || f == WeightFormat::Fp8PerChannel() || f == WeightFormat::Mxfp8() ||
         f == WeightFormat::Mxfp4() || f == WeightFormat::Mxfp4A8();
}

std::uint8_t MxScaleCode(float amax, int emax_elem) {
  if (std::isnan(amax)) return 0xFF;
  if (!(amax > 0.0f)) return 0;
  int exponent = 0;
  std::frexp(amax, &exponent);  // amax = f * 2^exponent, f in [0.5, 1): floor(log2(amax)) = exponent - 1
  const int shared = std::clamp(exponent - 1 - emax_elem, -127, 127);
  return static_cast<std::uint8_t>(shared + 127);
}

int Ue8m0Exponent(float amax) {
  int e = 0;
  const float m = std::frexp(std::max(amax, kActivationFloor) / kE4M3Max, &e);  // m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;
}

QuantizedMatrix QuantizeMatrix(const float* w, std::int64_t rows, std::int64_t cols, const WeightFormat& format) {
  CheckFormat(format, "QuantizeMatrix");
  const std::int64_t br = format.block_rows, bc = format.block_cols;
  const std::int64_t grid_rows = CeilDiv(rows, br), grid_cols = CeilDiv(cols, bc);
  QuantizedMatrix q{Buffer(format.values, Shape{rows, cols}), Buffer(format.scales, Shape{grid_rows, grid_cols})};
  std::memset(q.codes.ptr<std::uint8_t>(), 0, q.codes.tensor().bytes());
  CodeWriter writer(format.values, q.codes.ptr<std::uint8_t>());
  for (std::int64_t gr = 0; gr < grid_rows; ++gr) {
    for (std::int64_t gc = 0; gc < grid_cols; ++gc) {
      const std::int64_t r0 = gr * br, r1 = std::min(rows, r0 + br), c0 = gc * bc, c1 = std::min(cols, c0 + bc);
      Extent extent;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) extent.Add(w[r * cols + c]);
      const std::int64_t s = gr * grid_cols + gc;
      if (MxScaled(format)) {
        const std::uint8_t code = extent.nan ? 0xFF : MxScaleCode(extent.amax, EmaxOf(format.values));
        q.scales.ptr<std::uint8_t>()[s] = code;
        // Dividing by a power of two is exact; a NaN block's codes are never read.
        const int shift = code == 0xFF ? 0 : 127 - code;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < c1; ++c) writer.Put(r * cols + c, std::ldexp(w[r * cols + c], shift));
      } else {
        const float scale = Fp32Scale(extent);
        q.scales.ptr<float>()[s] = scale;
        for (std::int64_t r = r0; r < r1; ++r)
          for (std::int64_t c = c0; c < c1; ++c) writer.Put(r * cols + c, w[r * cols + c] / scale);
      }
    }
  }
  return q;
}

void DequantizeMatrix(const WeightView& w, float* out) {
  w.Check("DequantizeMatrix");
  const WeightFormat& f = w.format;
  CheckFormat(f, "DequantizeMatrix");
  const std::int64_t rows = w.rows(), cols = w.cols(), grid_cols = CeilDiv(cols, f.block_cols);
  const auto* codes = static_cast<const std::uint8_t*>(w.values.data);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::int64_t s = (r / f.block_rows) * grid_cols + c / f.block_cols;
      const float scale =
          MxScaled(f) ? E8M0ToF32(static_cast<const std::uint8_t*>(w.scales.data)[s]) : w.scales.ptr<float>()[s];
      out[r * cols + c] = CodeValue(f.values, codes, r * cols + c) * scale;
    }
  }
}

void QuantizeActivations(const WeightFormat& format, const float* x, std::int64_t k, float* out) {
  CheckFormat(format, "QuantizeActivations");
  // A format with its own rule (Mxfp4A8): e4m3 per block with a power-of-two scale.
  if (format.e4m3_act_block > 0) {
    for (std::int64_t g0 = 0; g0 < k; g0 += format.e4m3_act_block) {
      const std::int64_t g1 = std::min<std::int64_t>(k, g0 + format.e4m3_act_block);
      Extent extent;
      for (std::int64_t i = g0; i < g1; ++i) extent.Add(x[i]);
      const int e = Ue8m0Exponent(extent.amax);
      for (std::int64_t i = g0; i < g1; ++i) out[i] = std::ldexp(F8E4M3ToF32(F32ToF8E4M3(std::ldexp(x[i], -e))), e);
    }
    return;
  }
  // Groups along the row: 128 for block FP8, the whole row per token, 32 for MX.
  std::int64_t group = std::max<std::int64_t>(k, 1);
  if (format == WeightFormat::Fp8Block128()) group = 128;
  if (MxScaled(format)) group = 32;
  for (std::int64_t g0 = 0; g0 < k; g0 += group) {
    const std::int64_t g1 = std::min(k, g0 + group);
    Extent extent;
    for (std::int64_t i = g0; i < g1; ++i) extent.Add(x[i]);
    if (MxScaled(format)) {
      const std::uint8_t code = extent.nan ? 0xFF : MxScaleCode(extent.amax, EmaxOf(format.values));
      const float scale = E8M0ToF32(code);  // NaN for a group holding a NaN: the group decodes to NaN
      for (std::int64_t i = g0; i < g1; ++i) {
        const float scaled = code == 0xFF ? 0.0f : std::ldexp(x[i], 127 - code);
        const float value = format.values == DType::kF4E2M1 ? F4E2M1ToF32(F32ToF4E2M1(scaled))
                                                            : F8E4M3ToF32(F32ToF8E4M3(scaled));
        out[i] = value * scale;
      }
    } else {
      const float scale = std::max(extent.amax, kActivationFloor) / kE4M3Max;
      for (std::int64_t i = g0; i < g1; ++i) out[i] = F8E4M3ToF32(F32ToF8E4M3(x[i] / scale)) * scale;
    }
  }
}

std::string ActivationRuleName(const WeightFormat& format) {
  if (format == WeightFormat::Fp8Block128()) return "e4m3 per 1x128, fp32 scales";
  if (format == WeightFormat::Fp8PerChannel()) return "e4m3 per token, fp32 scales";
  if (format == WeightFormat::Mxfp8()) return "e4m3 per 1x32, e8m0 scales";
  if (format == WeightFormat::Mxfp4()) return "e2m1 per 1x32, e8m0 scales";
  if (format == WeightFormat::Mxfp4A8()) return "e4m3 per 1x128, ue8m0 scales";
  return "none";
}

}  // namespace fission
