// DeepSeek-V4 on the CPU: how window keys and compressed entries are stored (kernels/v4_ops.h,
// V4KvFormat): copied exactly, or the nope values as e4m3 with ue8m0 block scales and the rope
// values in bf16.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/cpu_v4.h"
#include "tensor/quantize.h"

namespace fission::kernels::cpu {
namespace {

// The block's ue8m0 scale as an exponent: 2^ceil(log2(max(amax, 1e-4) / 448)).
int BlockExponent(const float* x, std::int64_t n) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  return Ue8m0Exponent(amax);
}

// One row's nope values through their codes: `codes` and the block exponents, or null to only
// round `x` in place.
void EncodeNope(float* x, std::int64_t nope, std::uint8_t* codes, std::uint8_t* scales) {
  for (std::int64_t b = 0, i0 = 0; i0 < nope; ++b, i0 += kV4Fp8Block) {
    const std::int64_t len = std::min(kV4Fp8Block, nope - i0);
    const int e = BlockExponent(x + i0, len);
    const float scale = std::ldexp(1.0f, e);
    for (std::int64_t i = i0; i < i0 + len; ++i) {
      const std::uint8_t code = F32ToF8E4M3(x[i] / scale);
      if (codes != nullptr) codes[i] = code;
      x[i] = F8E4M3ToF32(code) * scale;
    }
    if (scales != nullptr) scales[b] = static_cast<std::uint8_t>(e + 127);
  }
}

}  // namespace

void ReadV4Entry(const Tensor& cache, std::int64_t slot, std::int64_t head_dim, std::int64_t rope, V4KvFormat format,
                 float* out) {
  if (format == V4KvFormat::kExact) {
    ConvertToF32(cache.dtype, static_cast<const std::uint8_t*>(cache.data) + DTypeBytes(cache.dtype, slot * head_dim),
                 out, head_dim);
    return;
  }
  const std::int64_t nope = head_dim - rope;
  const std::uint8_t* entry = cache.ptr<std::uint8_t>() + slot * V4KvEntryBytes(head_dim, rope);
  const std::uint8_t* scales = entry + nope;
  for (std::int64_t i = 0; i < nope; ++i) out[i] = F8E4M3ToF32(entry[i]) * E8M0ToF32(scales[i / kV4Fp8Block]);
  ConvertToF32(DType::kBF16, scales + V4KvScaleCount(nope), out + nope, rope);
}

void CpuV4Ops::RoundToStorage(const Tensor& rows, std::int64_t rope_dim) {
  const std::int64_t d = rows.shape[rows.rank() - 1], n = rows.numel() / d, nope = d - rope_dim;
  for (std::int64_t t = 0; t < n; ++t) {
    float* x = rows.ptr<float>() + t * d;
    EncodeNope(x, nope, nullptr, nullptr);
    for (std::int64_t i = nope; i < d; ++i) x[i] = Bf16ToF32(F32ToBf16(x[i]));
  }
}

void CpuV4Ops::WriteEntries(const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                            V4KvFormat format, std::int64_t rope_dim) {
  if (format == V4KvFormat::kExact) return WriteKv(rows, slots, cache);
  const std::int64_t d = rows.shape[rows.rank() - 1], nope = d - rope_dim, bytes = V4KvEntryBytes(d, rope_dim);
  FISSION_CHECK(cache.dtype == DType::kU8 && cache.shape[1] == bytes && rows.numel() == static_cast<std::int64_t>(slots.size()) * d,
                "fp8 V4 entries ", cache.shape.ToString(), " for rows of ", d, " (", bytes, " bytes each)");
  std::vector<float> x(static_cast<std::size_t>(d));
  for (std::size_t t = 0; t < slots.size(); ++t) {
    FISSION_CHECK(slots[t] >= -1 && slots[t] < cache.shape[0], "V4 entry slot ", slots[t]);
    if (slots[t] < 0) continue;
    std::uint8_t* entry = cache.ptr<std::uint8_t>() + slots[t] * bytes;
    std::memcpy(x.data(), rows.ptr<float>() + static_cast<std::int64_t>(t) * d, d * sizeof(float));
    EncodeNope(x.data(), nope, entry, entry + nope);
    ConvertFromF32(DType::kBF16, x.data() + nope, entry + nope + V4KvScaleCount(nope), rope_dim);
  }
}

}  // namespace fission::kernels::cpu
