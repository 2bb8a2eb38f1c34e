// Writing latent rows into an FP8 cache and gathering a step's rows out of either format.
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mla_latent.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kWriteThreads = 128;
constexpr float kE4M3Max = 448.0f;

// Block i quantizes row i into slot slots[i] (-1: skipped). Warp w takes 128-groups w, w + 4, ...;
// a lane four consecutive codes of its group. The scale is max(amax, 1e-4) / 448 over the values
// the group holds and codes are value / scale rounded to nearest even, saturating: the CPU
// backend's rule (QuantizeFp8PerTokenGroup), so both write the same bytes from the same rows.
__global__ void WriteFp8LatentKernel(const void* rows, Elem re, const std::int64_t* slots, std::uint8_t* cache,
                                     int lora, int rope, std::int64_t entry_bytes) {
  const std::int64_t slot = slots[blockIdx.x];
  if (slot < 0) return;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (lora + rope);
  std::uint8_t* entry = cache + slot * entry_bytes;
  const int groups = (lora + kLatentFp8Group - 1) / kLatentFp8Group;
  float* scales = reinterpret_cast<float*>(entry + lora);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int g = warp; g < groups; g += kWriteThreads / 32) {
    const int c0 = g * kLatentFp8Group + 4 * lane;
    float v[4];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = c0 + i;
      const bool in = c < lora && c < (g + 1) * kLatentFp8Group;
      v[i] = in ? LoadF(rows, row + c, re) : 0.0f;
      amax = fmaxf(amax, fabsf(v[i]));
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float scale = fmaxf(amax, 1e-4f) / kE4M3Max;
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (c0 + i < lora)
        entry[c0 + i] = static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(v[i] / scale, __NV_SATFINITE, __NV_E4M3));
    if (lane == 0) scales[g] = scale;
  }
  auto* rope_out = reinterpret_cast<__nv_bfloat16*>(entry + lora + 4 * groups);
  for (int c = threadIdx.x; c < rope; c += kWriteThreads)
    rope_out[c] = __float2bfloat16_rn(LoadF(rows, row + lora + c, re));
}

// Row i of out (bf16 [count, lora + rope]) = the decoded row of cache slot slots[i].
__global__ void GatherLatentKernel(LatentRows latent, const std::int32_t* slots, __nv_bfloat16* out) {
  const int width = latent.lora + latent.rope;
  const std::int64_t slot = slots[blockIdx.x];
  __nv_bfloat16* dst = out + static_cast<std::int64_t>(blockIdx.x) * width;
  for (int c = threadIdx.x; c < width; c += blockDim.x) dst[c] = __float2bfloat16_rn(LatentValue(latent, slot, c));
}

}  // namespace

void WriteLatent(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                 const MlaShape& sh) {
  if (sh.latent_format == LatentFormat::kExact) return WriteKv(ctx, rows, slots, cache);
  const std::int64_t lora = sh.kv_lora_rank, rope = sh.qk_rope_head_dim, bytes = LatentRowWidth(sh);
  FISSION_CHECK(cache.dtype == DType::kU8 && cache.rank() == 2 && cache.shape[1] == bytes &&
                    rows.numel() == static_cast<std::int64_t>(slots.size()) * (lora + rope),
                "fp8 latent cache ", cache.shape.ToString(), " ", DTypeName(cache.dtype), " for rows ",
                rows.shape.ToString(), " (", bytes, "-byte entries expected)");
  for (std::int64_t s : slots) FISSION_CHECK(s >= -1 && s < cache.shape[0], "kv slot ", s);
  if (slots.empty()) return;
  DeviceMeta dev = ctx.Upload(slots);
  WriteFp8LatentKernel<<<static_cast<unsigned>(slots.size()), kWriteThreads, 0, ctx.stream()>>>(
      rows.data, ElemOf(rows), dev.ptr<std::int64_t>(), cache.ptr<std::uint8_t>(), static_cast<int>(lora),
      static_cast<int>(rope), bytes);
  FISSION_LAUNCHED();
}

void GatherLatent(CudaContext& ctx, const Tensor& cache, const MlaShape& sh, const std::int32_t* slots,
                  std::int64_t count, const Tensor& out) {
  FISSION_CHECK(out.dtype == DType::kBF16 && out.numel() == count * (sh.kv_lora_rank + sh.qk_rope_head_dim),
                "GatherLatent out ", out.shape.ToString());
  if (count == 0) return;
  if (sh.latent_format == LatentFormat::kExact) return GatherRowsDevice(ctx, cache, slots, count, out);
  GatherLatentKernel<<<static_cast<unsigned>(count), 128, 0, ctx.stream()>>>(LatentRowsOf(cache, sh), slots,
                                                                           out.ptr<__nv_bfloat16>());
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
