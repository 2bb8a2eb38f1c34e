// The latent rows: split out of the joint down-projection, written into an FP8 cache, and a
// step's rows gathered out of either format.
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

// Block i splits row i of a [n, q_lora + kv_width] (fp32) into its normalised query latent and its
// latent row. Thread t holds columns t, t + kSplitThreads, ... of each part in registers (one read
// of the row), sums their squares in that order, then the lanes by a shuffle tree and the warps'
// sums in warp order: RmsNorm's order (elementwise.cu), so each part gets the bits RmsNorm gives
// it. The rope key (the columns past kv_lora) does not depend on the norms: its threads rotate and
// store it first, as RopeKernel does, so its sin/cos overlap the reductions.
constexpr int kSplitThreads = 256;
template <int kQHeld, int kKvHeld>
__global__ void __launch_bounds__(kSplitThreads)
    SplitLatentsKernel(const float* a, const float* q_norm, const float* kv_norm, float eps, int q_lora, int kv_lora,
                       int rope, const std::int32_t* positions, const float* inv_freq, float scaling,
                       bool interleaved, float* q_latent, float* kv_row) {
  const std::int64_t i = blockIdx.x;
  const int kv_width = kv_lora + rope, t = static_cast<int>(threadIdx.x);
  const float* row = a + i * (q_lora + kv_width);
  const float* kv_in = row + q_lora;
  float* q_out = q_latent + i * q_lora;
  float* kv_out = kv_row + i * kv_width;
  float q[kQHeld], kv[kKvHeld];
#pragma unroll
  for (int h = 0; h < kQHeld; ++h) q[h] = t + h * kSplitThreads < q_lora ? row[t + h * kSplitThreads] : 0.0f;
#pragma unroll
  for (int h = 0; h < kKvHeld; ++h) kv[h] = t + h * kSplitThreads < kv_lora ? kv_in[t + h * kSplitThreads] : 0.0f;
  const int half = rope / 2;
  for (int j = t; j < half; j += kSplitThreads) {
    const float* key = kv_in + kv_lora;
    const float angle = static_cast<float>(positions[i]) * inv_freq[j];
    const float c = cosf(angle) * scaling, s = sinf(angle) * scaling;
    const float x0 = interleaved ? key[2 * j] : key[j];
    const float x1 = interleaved ? key[2 * j + 1] : key[j + half];
    kv_out[kv_lora + j] = x0 * c + (-x1) * s;
    kv_out[kv_lora + j + half] = x1 * c + x0 * s;
  }
  float q_sum = 0.0f, kv_sum = 0.0f;
#pragma unroll
  for (int h = 0; h < kQHeld; ++h) q_sum += q[h] * q[h];
#pragma unroll
  for (int h = 0; h < kKvHeld; ++h) kv_sum += kv[h] * kv[h];
  __shared__ float q_partial[kSplitThreads / 32], kv_partial[kSplitThreads / 32];
  for (int o = 16; o > 0; o >>= 1) {
    q_sum += __shfl_xor_sync(0xffffffffu, q_sum, o);
    kv_sum += __shfl_xor_sync(0xffffffffu, kv_sum, o);
  }
  if ((t & 31) == 0) {
    q_partial[t >> 5] = q_sum;
    kv_partial[t >> 5] = kv_sum;
  }
  __syncthreads();
  if (t < 32) {
    float qs = t < kSplitThreads / 32 ? q_partial[t] : 0.0f;
    float ks = t < kSplitThreads / 32 ? kv_partial[t] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
      qs += __shfl_xor_sync(0xffffffffu, qs, o);
      ks += __shfl_xor_sync(0xffffffffu, ks, o);
    }
    if (t == 0) {
      q_partial[0] = qs;
      kv_partial[0] = ks;
    }
  }
  __syncthreads();
  const float q_inv = 1.0f / sqrtf(q_partial[0] / static_cast<float>(q_lora) + eps);
  const float kv_inv = 1.0f / sqrtf(kv_partial[0] / static_cast<float>(kv_lora) + eps);
#pragma unroll
  for (int h = 0; h < kQHeld; ++h) {
    const int j = t + h * kSplitThreads;
    if (j < q_lora) q_out[j] = q_norm[j] * (q[h] * q_inv);
  }
#pragma unroll
  for (int h = 0; h < kKvHeld; ++h) {
    const int j = t + h * kSplitThreads;
    if (j < kv_lora) kv_out[j] = kv_norm[j] * (kv[h] * kv_inv);
  }
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

void SplitLatents(CudaContext& ctx, const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps,
                  const RopeArgs& rope, const Tensor& q_latent, const Tensor& kv_row) {
  const std::int64_t q_lora = q_latent.shape[-1], kv_width = kv_row.shape[-1], n = q_latent.numel() / q_lora;
  const std::int64_t kv_lora = kv_norm.numel(), rope_dim = kv_width - kv_lora;
  const auto f32 = [](const Tensor& t) { return t.dtype == DType::kF32; };
  FISSION_CHECK(f32(a) && f32(q_norm) && f32(kv_norm) && f32(q_latent) && f32(kv_row) && f32(rope.inv_freq) &&
                    a.numel() == n * (q_lora + kv_width) && kv_row.numel() == n * kv_width &&
                    q_norm.numel() == q_lora && rope_dim > 0 && rope_dim % 2 == 0 &&
                    rope.inv_freq.numel() == rope_dim / 2 && static_cast<std::int64_t>(rope.positions.size()) == n,
                "SplitLatents a", a.shape.ToString(), " q_latent", q_latent.shape.ToString(), " kv_row",
                kv_row.shape.ToString(), " norms ", q_norm.numel(), " and ", kv_norm.numel(), ", ",
                rope.positions.size(), " positions (fp32 tensors expected)");
  if (n == 0) return;
  // Registers for the widths DeepSeek's families use (q_lora up to 2,048, kv_lora up to 512).
  FISSION_CHECK(q_lora <= 16 * kSplitThreads && kv_lora <= 4 * kSplitThreads, "SplitLatents: q_lora_rank ", q_lora,
                " above ", 16 * kSplitThreads, " or kv_lora_rank ", kv_lora, " above ", 4 * kSplitThreads);
  DeviceMeta pos = ctx.Upload(rope.positions);
  const bool small = q_lora <= 8 * kSplitThreads && kv_lora <= 2 * kSplitThreads;
  const auto kernel = !small                          ? SplitLatentsKernel<16, 4>
                      : q_lora <= 6 * kSplitThreads ? SplitLatentsKernel<6, 2>
                                                    : SplitLatentsKernel<8, 2>;
  kernel<<<static_cast<unsigned>(n), kSplitThreads, 0, ctx.stream()>>>(
      a.ptr<float>(), q_norm.ptr<float>(), kv_norm.ptr<float>(), eps, static_cast<int>(q_lora),
      static_cast<int>(kv_lora), static_cast<int>(rope_dim), pos.ptr<std::int32_t>(), rope.inv_freq.ptr<float>(),
      rope.scaling, rope.interleaved, q_latent.ptr<float>(), kv_row.ptr<float>());
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
