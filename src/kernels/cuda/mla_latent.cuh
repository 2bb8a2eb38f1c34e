// How the MLA kernels read a latent cache row [kv_lora_rank | rope] in either of its formats
// (kernels/mla_ops.h, LatentFormat): exact rows (fp32 or bf16 elements), or FlashMLA's FP8 entry of
// kv_lora_rank e4m3 codes, one fp32 scale per 128 codes, then the rope part in bf16. Every kernel
// that reads the cache goes through these helpers, so an FP8 row is decoded where it is read
// (registers, then the kernel's own bf16 tile) and the cache is never copied dequantized.
#pragma once

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/mla_ops.h"

namespace fission::kernels::cuda {

struct LatentRows {
  const void* cache = nullptr;
  Elem elem = Elem::kBF16;   // exact rows' element type
  bool fp8 = false;          // FP8 entries (elem unused)
  std::int64_t stride = 0;   // elements (exact) or bytes (FP8) per row
  int lora = 0, rope = 0;
};

inline LatentRows LatentRowsOf(const Tensor& cache, const MlaShape& sh) {
  LatentRows r;
  r.cache = cache.data;
  r.fp8 = sh.latent_format == LatentFormat::kFp8;
  r.elem = r.fp8 ? Elem::kBF16 : ElemOf(cache);
  r.stride = cache.shape[1];
  r.lora = static_cast<int>(sh.kv_lora_rank);
  r.rope = static_cast<int>(sh.qk_rope_head_dim);
  return r;
}

// The cache tensor's row width the shape's format needs (elements, or bytes for FP8 entries).
inline std::int64_t LatentRowWidth(const MlaShape& sh) {
  return sh.latent_format == LatentFormat::kFp8 ? LatentEntryBytes(sh.kv_lora_rank, sh.qk_rope_head_dim)
                                                : sh.kv_lora_rank + sh.qk_rope_head_dim;
}

__device__ __forceinline__ float DecodeE4m3(std::uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// Column c of the row in cache slot `slot`, as fp32 (an FP8 code times its group's scale: the
// CPU reference's value, one rounding).
__device__ __forceinline__ float LatentValue(const LatentRows& r, std::int64_t slot, int c) {
  if (!r.fp8) return LoadF(r.cache, slot * r.stride + c, r.elem);
  const auto* entry = static_cast<const std::uint8_t*>(r.cache) + slot * r.stride;
  const int groups = (r.lora + kLatentFp8Group - 1) / kLatentFp8Group;
  if (c >= r.lora) {
    const auto* rope = reinterpret_cast<const __nv_bfloat16*>(entry + r.lora + 4 * groups);
    return __bfloat162float(rope[c - r.lora]);
  }
  const float scale = reinterpret_cast<const float*>(entry + r.lora)[c / kLatentFp8Group];
  return DecodeE4m3(entry[c]) * scale;
}

__device__ __forceinline__ std::uint32_t PackBf16(float lo, float hi) {
  return static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (static_cast<std::uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

// Columns [8·chunk, 8·chunk + 8) of an FP8 entry as eight bf16 values (16 bytes). The tiled
// kernels' lora and rope are multiples of 8 and kv_lora_rank of 128, so a chunk lies in one part
// and one scale group; every field is 16-byte aligned when the entry is (512 + 16 + 128 bytes).
__device__ __forceinline__ uint4 Fp8LatentChunk(const std::uint8_t* entry, int lora, int chunk) {
  const int c = 8 * chunk;
  if (c >= lora) {
    const int groups = (lora + kLatentFp8Group - 1) / kLatentFp8Group;
    return *reinterpret_cast<const uint4*>(entry + lora + 4 * groups + 2 * (c - lora));
  }
  const uint2 codes = *reinterpret_cast<const uint2*>(entry + c);
  const float scale = reinterpret_cast<const float*>(entry + lora)[c / kLatentFp8Group];
  float v[8];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = DecodeE4m3(static_cast<std::uint8_t>(codes.x >> (8 * i))) * scale;
    v[4 + i] = DecodeE4m3(static_cast<std::uint8_t>(codes.y >> (8 * i))) * scale;
  }
  return make_uint4(PackBf16(v[0], v[1]), PackBf16(v[2], v[3]), PackBf16(v[4], v[5]), PackBf16(v[6], v[7]));
}

}  // namespace fission::kernels::cuda
