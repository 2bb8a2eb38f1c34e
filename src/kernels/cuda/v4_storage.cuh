// How the CUDA kernels of DeepSeek-V4 read a window ring or an entries cache in its storage format
// (kernels/v4_ops.h, V4KvFormat; v4_storage.cu writes them): exact rows of head_dim values (fp32
// or bf16), or packed FP8 entries of V4KvEntryBytes bytes: the nope values as e4m3 codes, one
// ue8m0 exponent byte per block of 64 of them, then the rope values in bf16. An FP8 entry is
// 583 bytes for V4-Flash (448 + 7 + 128), so its fields have no alignment: they are read by byte.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/mla_latent.cuh"
#include "kernels/v4_ops.h"

namespace fission::kernels::cuda {

struct V4StoredRows {
  const void* data = nullptr;
  Elem elem = Elem::kF32;   // exact rows' element type
  bool fp8 = false;         // packed FP8 entries (elem unused)
  std::int64_t stride = 0;  // values (exact) or bytes (FP8) per entry
  int nope = 0, scales = 0;  // FP8: e4m3 values, and exponent bytes after them
};

// The row width a cache in `format` has for head_dim values: values, or bytes of an FP8 entry.
inline std::int64_t V4RowWidth(std::int64_t head_dim, std::int64_t rope, V4KvFormat format) {
  return format == V4KvFormat::kFp8 ? V4KvEntryBytes(head_dim, rope) : head_dim;
}

// Checks that `cache` (named `what` in the message) holds rows of head_dim values in `format`,
// and describes it for the kernels.
inline V4StoredRows V4StoredRowsOf(const Tensor& cache, std::int64_t head_dim, std::int64_t rope, V4KvFormat format,
                                   const char* what) {
  const bool fp8 = format == V4KvFormat::kFp8;
  const std::int64_t width = V4RowWidth(head_dim, rope, format);
  FISSION_CHECK(cache.rank() == 2 && cache.shape[1] == width, "V4 ", what, " ", cache.shape.ToString(), ": rows of ",
                width, fp8 ? " bytes" : " values", " expected (head_dim ", head_dim, ", rope ", rope,
                fp8 ? ", FP8 entries)" : ", exact rows)");
  FISSION_CHECK(fp8 ? cache.dtype == DType::kU8 : (cache.dtype == DType::kF32 || cache.dtype == DType::kBF16), "V4 ",
                what, " is ", DTypeName(cache.dtype), ": ", fp8 ? "U8 for FP8 entries" : "F32 or BF16 for exact rows",
                " expected");
  V4StoredRows r;
  r.data = cache.data;
  r.fp8 = fp8;
  r.elem = fp8 ? Elem::kF32 : ElemOf(cache);
  r.stride = width;
  r.nope = static_cast<int>(head_dim - rope);
  r.scales = static_cast<int>(V4KvScaleCount(head_dim - rope));
  return r;
}

// A ue8m0 exponent byte as the power of two it stands for (E8M0ToF32: 0 is 2^-127, 0xFF NaN).
__device__ __forceinline__ float DecodeUe8m0(std::uint8_t e) {
  if (e == 0xFF) return __uint_as_float(0x7FC00000u);
  return e == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(static_cast<std::uint32_t>(e) << 23);
}

// Value c of the entry in `slot`, as fp32: exact, or an e4m3 code times its block's power of two
// (one exact product, as ReadV4Entry computes it), or a bf16 rope value.
__device__ __forceinline__ float V4StoredValue(const V4StoredRows& r, std::int64_t slot, int c) {
  if (!r.fp8) return LoadF(r.data, slot * r.stride + c, r.elem);
  const auto* entry = static_cast<const std::uint8_t*>(r.data) + slot * r.stride;
  if (c < r.nope) return DecodeE4m3(entry[c]) * DecodeUe8m0(entry[r.nope + c / static_cast<int>(kV4Fp8Block)]);
  const std::uint8_t* bf16 = entry + r.nope + r.scales + 2 * (c - r.nope);  // little-endian
  return __uint_as_float((static_cast<std::uint32_t>(bf16[0]) | (static_cast<std::uint32_t>(bf16[1]) << 8)) << 16);
}

}  // namespace fission::kernels::cuda
