// DeepSeek-V4's storage of window keys and compressed entries on CUDA (kernels/v4_ops.h,
// V4KvFormat; the CPU reference is kernels/cpu/cpu_v4_storage.cc). Exact rows are WriteKv's copy.
// FP8 rows take one block per row and a warp per block of 64 nope values (two per lane): the
// block's amax by shuffles, its ue8m0 exponent 2^ceil(log2(max(amax, 1e-4) / 448)), each value
// divided by that power of two and rounded to e4m3, the rope values to bf16. The conversions are
// ports of the CPU's (tensor/dtype.cc: F32ToF8E4M3 with saturation, F32ToBf16), so both write the
// same bytes: the hardware cvt would agree on every finite value but not on a NaN's sign.
#include <cmath>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_v4.h"
#include "kernels/cuda/v4_storage.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr float kE4M3Max = 448.0f;
constexpr float kMinAmax = 1e-4f;
constexpr int kBlock = static_cast<int>(kV4Fp8Block);  // nope values per exponent

// F32ToBf16: round to nearest even; a NaN keeps its sign and is made quiet.
__device__ __forceinline__ std::uint16_t Bf16Bits(float v) {
  const std::uint32_t u = __float_as_uint(v);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// F32ToF8E4M3 (saturating): the magnitude's count of quanta of its binade, rounded to nearest even
// (subnormals share the quantum 2^-9 of the lowest binade), past 448 saturated.
__device__ __forceinline__ std::uint8_t E4m3Code(float v) {
  const std::uint32_t u = __float_as_uint(v);
  const std::uint8_t sign = (u >> 31) != 0 ? 0x80 : 0;
  const std::uint32_t mag_bits = u & 0x7FFFFFFFu;
  if (mag_bits > 0x7F800000u) return sign | 0x7F;   // NaN
  if (mag_bits == 0x7F800000u) return sign | 0x7E;  // infinity saturates
  if (mag_bits == 0) return sign;
  const float mag = __uint_as_float(mag_bits);
  int exponent = 0;  // mag = frac · 2^exponent, frac in [0.5, 1)
  frexpf(mag, &exponent);
  const int biased = exponent - 1 + 7;
  const int unit_exponent = (biased >= 1 ? exponent - 1 : -6) - 3;
  const auto units = static_cast<std::uint32_t>(rintf(ldexpf(mag, -unit_exponent)));  // exact scaling
  const std::uint32_t code = biased < 1 ? units : static_cast<std::uint32_t>(biased) * 8 + (units - 8);
  return sign | static_cast<std::uint8_t>(code > 0x7E ? 0x7E : code);
}

// The block's exponent e of 2^e = 2^ceil(log2(max(amax, 1e-4) / 448)) (BlockExponent).
__device__ __forceinline__ int BlockExponent(float amax) {
  int e = 0;
  const float m = frexpf(__fdiv_rn(fmaxf(amax, kMinAmax), kE4M3Max), &e);
  return m == 0.5f ? e - 1 : e;
}

// Row blockIdx.x of rows [n, head_dim] through its FP8 storage: with `slots`, encoded into entry
// slots[row] of `cache` (-1: skipped); without, rounded in place to the values that entry holds.
__global__ void V4Fp8RowsKernel(float* rows, int head_dim, int rope, const std::int64_t* slots, std::uint8_t* cache,
                                std::int64_t entry_bytes) {
  std::uint8_t* entry = nullptr;
  if (slots != nullptr) {
    const std::int64_t slot = slots[blockIdx.x];
    if (slot < 0) return;
    entry = cache + slot * entry_bytes;
  }
  float* x = rows + static_cast<std::int64_t>(blockIdx.x) * head_dim;
  const int nope = head_dim - rope, blocks = (nope + kBlock - 1) / kBlock;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int b = warp; b < blocks; b += kThreads / 32) {
    const int end = min(nope, (b + 1) * kBlock);
    const int i0 = b * kBlock + 2 * lane, i1 = i0 + 1;
    const float v0 = i0 < end ? x[i0] : 0.0f, v1 = i1 < end ? x[i1] : 0.0f;
    float amax = fmaxf(fabsf(v0), fabsf(v1));
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const int e = BlockExponent(amax);
    const float scale = ldexpf(1.0f, e);
    const std::uint8_t c0 = E4m3Code(__fdiv_rn(v0, scale)), c1 = E4m3Code(__fdiv_rn(v1, scale));
    if (entry != nullptr) {
      if (i0 < end) entry[i0] = c0;
      if (i1 < end) entry[i1] = c1;
      if (lane == 0) entry[nope + b] = static_cast<std::uint8_t>(e + 127);
    } else {
      if (i0 < end) x[i0] = DecodeE4m3(c0) * scale;
      if (i1 < end) x[i1] = DecodeE4m3(c1) * scale;
    }
  }
  std::uint8_t* rope_bytes = entry != nullptr ? entry + nope + blocks : nullptr;
  for (int i = threadIdx.x; i < rope; i += kThreads) {
    const std::uint16_t bits = Bf16Bits(x[nope + i]);
    if (entry != nullptr) {  // little-endian, as the CPU's uint16 stores
      rope_bytes[2 * i] = static_cast<std::uint8_t>(bits & 0xFF);
      rope_bytes[2 * i + 1] = static_cast<std::uint8_t>(bits >> 8);
    } else {
      x[nope + i] = __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
    }
  }
}

// The rows' head_dim (their last dimension), checked against the rope part.
std::int64_t RowsHeadDim(const Tensor& rows, std::int64_t rope_dim, const char* op) {
  FISSION_CHECK(rows.rank() >= 1 && rows.dtype == DType::kF32, op, ": rows must be fp32, got ",
                DTypeName(rows.dtype), " ", rows.shape.ToString());
  const std::int64_t d = rows.shape[rows.rank() - 1];
  FISSION_CHECK(d > 0 && rope_dim >= 0 && rope_dim <= d, op, ": rope_dim ", rope_dim, " for rows of ", d);
  return d;
}

}  // namespace

void V4RoundToStorage(CudaContext& ctx, const Tensor& rows, std::int64_t rope_dim) {
  const std::int64_t d = RowsHeadDim(rows, rope_dim, "V4RoundToStorage");
  const std::int64_t n = rows.numel() / d;
  if (n == 0) return;
  FISSION_CHECK(n < (std::int64_t{1} << 31), "V4RoundToStorage: too many rows (", n, ")");
  V4Fp8RowsKernel<<<static_cast<unsigned>(n), kThreads, 0, ctx.stream()>>>(
      rows.ptr<float>(), static_cast<int>(d), static_cast<int>(rope_dim), nullptr, nullptr, 0);
  FISSION_LAUNCHED();
}

void V4WriteEntries(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                    V4KvFormat format, std::int64_t rope_dim) {
  const std::int64_t d = RowsHeadDim(rows, rope_dim, "V4WriteEntries");
  FISSION_CHECK(rows.numel() == static_cast<std::int64_t>(slots.size()) * d, "V4WriteEntries: rows ",
                rows.shape.ToString(), " for ", slots.size(), " slots");
  V4StoredRowsOf(cache, d, rope_dim, format, "cache (window ring or entries)");  // the format's shape and dtype
  if (format == V4KvFormat::kExact) return WriteKv(ctx, rows, slots, cache);
  for (std::int64_t s : slots) FISSION_CHECK(s >= -1 && s < cache.shape[0], "V4 entry slot ", s, " of ", cache.shape[0]);
  if (slots.empty()) return;
  DeviceMeta dev = ctx.Upload(slots);
  V4Fp8RowsKernel<<<static_cast<unsigned>(slots.size()), kThreads, 0, ctx.stream()>>>(
      rows.ptr<float>(), static_cast<int>(d), static_cast<int>(rope_dim), dev.ptr<std::int64_t>(),
      cache.ptr<std::uint8_t>(), cache.shape[1]);
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
