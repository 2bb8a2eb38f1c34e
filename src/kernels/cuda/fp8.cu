// FP8 e4m3 Linear with 128×128 weight block scales and 1×128 per-token activation scales.
// The activations are quantized by QuantizeKernel; the GEMM runs in cuBLASLt's block-scaled mode
// (Hopper, CUDA >= 12.9) or, where cuBLASLt turns a problem down, in Fp8GemmKernel, a plain tiled
// kernel with the same arithmetic (exact code products, fp32 sums per group, scaled per group).
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma_gemv.cuh"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kGroup = 128;
constexpr float kE4M3Max = 448.0f;
// Layout bits: bit 0 set = activation scales token-major [n][kb] (else group-major [kb][n4]);
// bit 1 set = weight scales transposed [kb][mb] (else as stored, [mb][kb]).
constexpr int kFp8OwnKernel = 4;

std::int64_t Ceil(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Values [c0, c0 + 4) of a row of k values starting at element `row` of x, zeros past k: one 8- or
// 16-byte load when they are whole and aligned.
__device__ __forceinline__ void LoadFour(const void* x, Elem xe, std::int64_t row, std::int64_t c0, std::int64_t k,
                                         float (&v)[4]) {
  const std::int64_t idx = row + c0;
  if (c0 + 4 <= k && idx % 4 == 0) {
    if (xe == Elem::kF32) {
      const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(x) + idx);
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
      const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(x) + idx);
      v[0] = __uint_as_float(u.x << 16), v[1] = __uint_as_float(u.x & 0xffff0000u);
      v[2] = __uint_as_float(u.y << 16), v[3] = __uint_as_float(u.y & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = c0 + i < k ? LoadF(x, idx + i, xe) : 0.0f;
  }
}

// A warp's group of 128 values, 4 a lane: the group's scale (max(amax, 1e-4) / 448 over the whole
// warp) and the lane's four e4m3 codes, packed low byte first. Every lane must call it.
__device__ __forceinline__ std::uint32_t QuantizeFourInWarp(const float (&v)[4], float& scale) {
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(v[i]));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  scale = fmaxf(amax, 1e-4f) / kE4M3Max;
  std::uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    packed |= static_cast<std::uint32_t>(__nv_cvt_float_to_fp8(v[i] / scale, __NV_SATFINITE, __NV_E4M3)) << (8 * i);
  return packed;
}

// One warp per (token, group): 4 values a lane, amax by shuffles, then codes.
__global__ void QuantizeKernel(const void* x, Elem xe, std::int64_t n, std::int64_t k, std::uint8_t* codes,
                               float* scales, std::int64_t ts, std::int64_t gs) {
  const std::int64_t groups = (k + kGroup - 1) / kGroup;
  const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x / 32) + (threadIdx.x >> 5);
  if (item >= n * groups) return;
  const int lane = threadIdx.x & 31;
  const std::int64_t t = item / groups, g = item - t * groups;
  float v[4];
  const std::int64_t c0 = g * kGroup + lane * 4;
  const std::int64_t idx = t * k + c0;
  LoadFour(x, xe, t * k, c0, k, v);
  float scale;
  const std::uint32_t packed = QuantizeFourInWarp(v, scale);
  if (c0 + 4 <= k && idx % 4 == 0) {
    *reinterpret_cast<std::uint32_t*>(codes + idx) = packed;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (c0 + i < k) codes[idx + i] = static_cast<std::uint8_t>(packed >> (8 * i));
  }
  if (lane == 0) scales[t * ts + g * gs] = scale;
}

// Per-token activations (ptpc_fp8, WeightFormat::Fp8PerChannel): block t quantizes token t over
// its whole row (scale max(amax, 1e-4) / 448, the CPU's rule) and writes that scale into each of
// the row's `groups` group slots, so the products read it as they read per-group scales.
__global__ void QuantizeRowKernel(const void* x, Elem xe, std::int64_t k, std::uint8_t* codes, float* scales,
                                  std::int64_t ts, std::int64_t gs, std::int64_t groups) {
  __shared__ float red[32];
  const std::int64_t t = blockIdx.x;
  float amax = 0.0f;
  for (std::int64_t c = threadIdx.x; c < k; c += blockDim.x) amax = fmaxf(amax, fabsf(LoadF(x, t * k + c, xe)));
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) amax = fmaxf(amax, red[w]);
  const float scale = fmaxf(amax, 1e-4f) / kE4M3Max;
  for (std::int64_t c = threadIdx.x; c < k; c += blockDim.x)
    codes[t * k + c] = static_cast<std::uint8_t>(
        __nv_cvt_float_to_fp8(LoadF(x, t * k + c, xe) / scale, __NV_SATFINITE, __NV_E4M3));
  for (std::int64_t g = threadIdx.x; g < groups; g += blockDim.x) scales[t * ts + g * gs] = scale;
}

__device__ __forceinline__ float E4M3ToFloat(std::uint8_t code) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// out[t, j] = Σ_g xs[t,g] · ws[j/128, g] · Σ_{c in g} x[t,c] · w[j,c]. Tiles of 64 tokens × 64 rows,
// 256 threads with 4×4 outputs each, k in slices of 32.
constexpr int kTile = 64, kSlice = 32;
__global__ void Fp8GemmKernel(const std::uint8_t* xq, const float* xs, std::int64_t ts, std::int64_t gs,
                              const std::uint8_t* w, const float* ws, std::int64_t n, std::int64_t m, std::int64_t k,
                              void* out, Elem oe) {
  __shared__ float sx[kTile][kSlice + 1], sw[kTile][kSlice + 1];
  const std::int64_t t0 = blockIdx.y * static_cast<std::int64_t>(kTile), j0 = blockIdx.x * static_cast<std::int64_t>(kTile);
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;  // rows tr + 16i, cols tc + 16j
  const std::int64_t kb = (k + kGroup - 1) / kGroup;
  float acc[4][4] = {};
  for (std::int64_t g = 0; g < kb; ++g) {
    float part[4][4] = {};
    const std::int64_t g_end = (g + 1) * kGroup < k ? (g + 1) * kGroup : k;
    for (std::int64_t c0 = g * kGroup; c0 < g_end; c0 += kSlice) {
      for (int e = threadIdx.x; e < kTile * kSlice; e += blockDim.x) {
        const int r = e / kSlice, c = e % kSlice;
        const std::int64_t kc = c0 + c;
        const bool kin = kc < k && kc < (g + 1) * kGroup;
        sx[r][c] = (kin && t0 + r < n) ? E4M3ToFloat(xq[(t0 + r) * k + kc]) : 0.0f;
        sw[r][c] = (kin && j0 + r < m) ? E4M3ToFloat(w[(j0 + r) * k + kc]) : 0.0f;
      }
      __syncthreads();
#pragma unroll 4
      for (int c = 0; c < kSlice; ++c)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) part[i][j] += sx[tr + 16 * i][c] * sw[tc + 16 * j][c];
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const std::int64_t t = t0 + tr + 16 * i;
      const float sxv = t < n ? xs[t * ts + g * gs] : 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const std::int64_t r = j0 + tc + 16 * j;
        const float swv = r < m ? ws[(r / kGroup) * kb + g] : 0.0f;
        acc[i][j] += part[i][j] * (sxv * swv);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const std::int64_t t = t0 + tr + 16 * i, r = j0 + tc + 16 * j;
      if (t < n && r < m) StoreF(out, t * m + r, oe, acc[i][j]);
    }
}

// Few tokens (decode): FP8 tensor-core products (mma.sync m16n8k32, e4m3 x e4m3 -> fp32), a warp
// per 16 output rows and up to kGemvTokens tokens (the MMA's 8 columns). The arithmetic
// converting codes in the ALU reached only 0.7-1.0 TB/s; the MMA takes the codes as they are.
// Within a 128-group the dot product's k order is free, so each lane's fragment positions are
// mapped onto one contiguous 32-byte piece of its weight rows (gid and gid + 8) and of its token's
// activation codes: MMA j of a group uses bytes [8j, 8j + 8) of every lane's piece, for A and B
// alike. Each group's four MMAs are summed in fp32 and then scaled by the weight block's and the
// token's group scale (the per-group promotion keeps the tensor core's accumulation short). The
// block's warps split the groups and their sums are added in warp order. k % 16 == 0; a partial
// last group is zero-padded by the loads. Output row t of a pass is out row out_row0 + t.
constexpr int kGemvTokens = 8, kMmaRows = 16, kMmaWarps = 4, kNarrowWarps = 16;
constexpr std::int64_t kGemvMaxTokens = 8, kPadTokens = 32, kPadMultiple = 16;
// cuBLASLt's block-scaled GEMM is used only for k of at least this many values: on H200 / CUDA
// 13.0 it gave relative errors of 0.44-0.48 for expert GEMMs with k = 128-384 (tests of
// 2026-11-30) while every shape with k >= 1536 matched; smaller k takes the tiled kernel.
constexpr std::int64_t kCublasMinK = 1024;

__device__ __forceinline__ uint4 Load16(const std::uint8_t* p, bool ok) {
  return ok ? __ldg(reinterpret_cast<const uint4*>(p)) : make_uint4(0, 0, 0, 0);
}

// One token's codes of group g quantized inside the warp, by QuantizeKernel's arithmetic on the
// same partition (lane L owns values [128g + 4L, +4), the amax is the warp's, the same division
// and conversion), so they are that kernel's bytes. Lane (gid, t)'s fragment words j = 0..7 are
// bytes [32t + 4j, +4) of the group: lane 8t + j's word, for row gid 0 (the token) and zero for
// the rest. Returns the group's scale.
__device__ __forceinline__ float QuantizeGroupInWarp(const void* x, Elem xe, std::int64_t k, std::int64_t g,
                                                     uint4& x0, uint4& x1) {
  const int lane = threadIdx.x & 31;
  float v[4];
  LoadFour(x, xe, 0, g * kGroup + lane * 4, k, v);
  float scale;
  const std::uint32_t packed = QuantizeFourInWarp(v, scale);
  const int t = lane & 3;
  std::uint32_t word[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) word[j] = __shfl_sync(0xffffffffu, packed, 8 * t + j);
  const bool token = (lane >> 2) == 0;
  x0 = token ? make_uint4(word[0], word[1], word[2], word[3]) : make_uint4(0, 0, 0, 0);
  x1 = token ? make_uint4(word[4], word[5], word[6], word[7]) : make_uint4(0, 0, 0, 0);
  return scale;
}

// kOneToken: the input is one token's raw row x (fp32 or bf16), quantized group by group in the
// warps that read the group (QuantizeGroupInWarp): no quantization launch before a batch-1
// decode product. Otherwise xq / xs are QuantizeKernel's codes and scales of n <= 8 tokens.
template <int kWarps, bool kOneToken>
__device__ void Fp8MmaTile(const std::uint8_t* xq, const float* xs, const void* x, Elem xe, std::int64_t n,
                           const std::uint8_t* w, const float* ws, std::int64_t m, std::int64_t k, std::int64_t row0,
                           void* out, std::int64_t out_row0, Elem oe) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  const std::int64_t kb = (k + kGroup - 1) / kGroup, ra = row0 + gid, rb = ra + 8;
  const bool has_a = ra < m, has_b = rb < m, has_x = gid < n;
  const std::int64_t t0 = 2 * t, t1 = 2 * t + 1;
  const float* wsr = ws + (row0 / kGroup) * kb;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
  for (std::int64_t g = warp; g < kb; g += kWarps) {
    const std::int64_t at = g * kGroup + 32 * t;
    const bool lo = at < k, hi = at + 16 < k;
    const uint4 a0 = Load16(w + ra * k + at, has_a && lo), a1 = Load16(w + ra * k + at + 16, has_a && hi);
    const uint4 b0 = Load16(w + rb * k + at, has_b && lo), b1 = Load16(w + rb * k + at + 16, has_b && hi);
    uint4 x0, x1;
    float xs0, xs1;
    if constexpr (kOneToken) {
      const float scale = QuantizeGroupInWarp(x, xe, k, g, x0, x1);
      xs0 = t == 0 ? scale : 0.0f;
      xs1 = 0.0f;
    } else {
      x0 = Load16(xq + gid * k + at, has_x && lo);
      x1 = Load16(xq + gid * k + at + 16, has_x && hi);
      xs0 = t0 < n ? xs[t0 * kb + g] : 0.0f;
      xs1 = t1 < n ? xs[t1 * kb + g] : 0.0f;
    }
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    MmaE4m3(d, a0.x, b0.x, a0.y, b0.y, x0.x, x0.y);
    MmaE4m3(d, a0.z, b0.z, a0.w, b0.w, x0.z, x0.w);
    MmaE4m3(d, a1.x, b1.x, a1.y, b1.y, x1.x, x1.y);
    MmaE4m3(d, a1.z, b1.z, a1.w, b1.w, x1.z, x1.w);
    const float wsc = wsr[g];
    const float s0 = wsc * xs0, s1 = wsc * xs1;
    acc[0] += d[0] * s0;
    acc[1] += d[1] * s1;
    acc[2] += d[2] * s0;
    acc[3] += d[3] * s1;
  }
  StoreMmaTile<kWarps>(acc, n, m, row0, out, out_row0, oe);
}

// xq: activation codes [n][k] (n <= kGemvTokens), xs: their scales [n][kb].
template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32) Fp8GemvKernel(const std::uint8_t* xq, const float* xs, std::int64_t n, const std::uint8_t* w,
                              const float* ws, std::int64_t m, std::int64_t k, void* out, std::int64_t out_row0,
                              Elem oe) {
  Fp8MmaTile<kWarps, false>(xq, xs, nullptr, Elem::kF32, n, w, ws, m, k,
                            blockIdx.x * static_cast<std::int64_t>(kMmaRows), out, out_row0, oe);
}

// One token's raw row x (fp32 or bf16): the product with its quantization fused (kOneToken).
template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32) Fp8GemvOneTokenKernel(const void* x, Elem xe, const std::uint8_t* w,
                                                                   const float* ws, std::int64_t m, std::int64_t k,
                                                                   void* out, Elem oe) {
  Fp8MmaTile<kWarps, true>(nullptr, nullptr, x, xe, 1, w, ws, m, k, blockIdx.x * static_cast<std::int64_t>(kMmaRows),
                           out, 0, oe);
}

// Many weights in one launch (the routed experts): blockIdx.y picks the item, a run of at most
// kGemvTokens consecutive activation rows and the weight they go through.
__global__ void Fp8GemvGroupedKernel(const std::uint8_t* xq, const float* xs, const Fp8GemvItem* items,
                                     std::int64_t m, std::int64_t k, void* out, Elem oe) {
  const Fp8GemvItem it = items[blockIdx.y];
  const std::int64_t kb = (k + kGroup - 1) / kGroup;
  Fp8MmaTile<kMmaWarps, false>(xq + it.row0 * k, xs + it.row0 * kb, nullptr, Elem::kF32, it.rows, it.w, it.w_scale,
                                m, k, blockIdx.x * static_cast<std::int64_t>(kMmaRows), out, it.row0, oe);
}

// The same over runs a device kernel listed (the routed experts' decode path): blocks past the
// listed count return at once, the weights come from the per-expert pointer table.
static_assert(kGemvRunRows == kGemvTokens);
__global__ void Fp8GemvRunsKernel(const std::uint8_t* xq, const float* xs, const ExpertRun* runs,
                                  const std::int32_t* run_count, const std::uint8_t* const* w,
                                  const float* const* w_scale, std::int64_t m, std::int64_t k, void* out, Elem oe) {
  if (static_cast<std::int32_t>(blockIdx.y) >= *run_count) return;
  const ExpertRun run = runs[blockIdx.y];
  const std::int64_t kb = (k + kGroup - 1) / kGroup;
  Fp8MmaTile<kMmaWarps, false>(xq + run.row0 * k, xs + run.row0 * kb, nullptr, Elem::kF32, run.rows, w[run.expert],
                                w_scale[run.expert], m, k, blockIdx.x * static_cast<std::int64_t>(kMmaRows), out,
                                run.row0, oe);
}

__global__ void TransposeKernel(const float* src, float* dst, std::int64_t rows, std::int64_t cols) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < rows * cols) dst[(i % cols) * rows + i / cols] = src[i];
}

// Deterministic pseudo-random fill for the layout probe.
__device__ __forceinline__ std::uint32_t Hash(std::uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
__global__ void ProbeFillKernel(float* x, std::int64_t nx, std::uint8_t* w, std::int64_t nw, float* ws,
                                std::int64_t nws) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < nx) x[i] = (Hash(static_cast<std::uint32_t>(i) * 3u + 1u) % 20001u) / 10000.0f - 1.0f;
  if (i < nw) {
    std::uint8_t c = static_cast<std::uint8_t>(Hash(static_cast<std::uint32_t>(i) * 5u + 7u));
    if ((c & 0x7F) == 0x7F) c = 0x7E;  // never NaN
    w[i] = c;
  }
  if (i < nws) ws[i] = 1e-3f * (1 + Hash(static_cast<std::uint32_t>(i) + 99u) % 64u);
}

struct Quantized {
  Buffer codes, scales;
  std::int64_t ts = 0, gs = 0;
};

Quantized QuantizeFor(CudaContext& ctx, const Tensor& x, std::int64_t n, std::int64_t k, bool token_major,
                      Fp8Activations rule = Fp8Activations::kPerGroup) {
  Quantized q;
  const std::int64_t kb = Ceil(k, kGroup), n4 = Ceil(n, 4) * 4;
  q.codes = Buffer(DType::kU8, Shape{n, k}, ctx.allocator());
  q.scales = Buffer(DType::kF32, Shape{kb * n4}, ctx.allocator());
  q.ts = token_major ? kb : 1;
  q.gs = token_major ? 1 : n4;
  if (rule == Fp8Activations::kPerGroup) {
    QuantizeFp8(ctx, x.View(Shape{n, k}), q.codes.ptr<std::uint8_t>(), q.scales.ptr<float>(), q.ts, q.gs);
  } else if (n > 0) {
    QuantizeRowKernel<<<static_cast<unsigned>(n), 256, 0, ctx.stream()>>>(
        x.data, ElemOf(x), k, q.codes.ptr<std::uint8_t>(), q.scales.ptr<float>(), q.ts, q.gs, kb);
    FISSION_LAUNCHED();
  }
  return q;
}

// cuBLASLt with layout `mode`; false when it turns the problem down.
bool CublasFp8(CudaContext& ctx, int mode, const Quantized& q, const Tensor& w, const Tensor& w_scale, std::int64_t n,
               const Tensor& out_bf16) {
  const std::int64_t m = w.shape[0], k = w.shape[1];
  Buffer ws_t;
  const float* ws = w_scale.ptr<float>();
  if (mode & 2) {
    const std::int64_t mb = w_scale.shape[0], kb = w_scale.shape[1];
    ws_t = Buffer(DType::kF32, Shape{kb, mb}, ctx.allocator());
    TransposeKernel<<<Blocks(mb * kb, 256), 256, 0, ctx.stream()>>>(ws, ws_t.ptr<float>(), mb, kb);
    FISSION_LAUNCHED();
    ws = ws_t.ptr<float>();
  }
  GemmDesc g;
  g.trans_a = true;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = w.data;
  g.a_type = CUDA_R_8F_E4M3;
  g.lda = k;
  g.b = q.codes.tensor().data;
  g.b_type = CUDA_R_8F_E4M3;
  g.ldb = k;
  g.d = out_bf16.data;
  g.d_type = CUDA_R_16BF;
  g.ldd = m;
  g.a_scale = ws;
  g.b_scale = q.scales.ptr<float>();
  return ctx.Gemm(g);
}

void OwnFp8(CudaContext& ctx, const Quantized& q, const Tensor& w, const Tensor& w_scale, std::int64_t n,
            const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1];
  const dim3 grid(static_cast<unsigned>(Ceil(m, kTile)), static_cast<unsigned>(Ceil(n, kTile)));
  Fp8GemmKernel<<<grid, 256, 0, ctx.stream()>>>(q.codes.ptr<std::uint8_t>(), q.scales.ptr<float>(), q.ts, q.gs,
                                               w.ptr<std::uint8_t>(), w_scale.ptr<float>(), n, m, k, out.data,
                                               ElemOf(out));
  FISSION_LAUNCHED();
}

// Finds the scale layouts under which cuBLASLt agrees with the own kernel.
int ProbeLayout(CudaContext& ctx) {
  constexpr std::int64_t n = 64, m = 384, k = 512;
  Buffer x(DType::kF32, Shape{n, k}, ctx.allocator()), w(DType::kU8, Shape{m, k}, ctx.allocator()),
      ws(DType::kF32, Shape{m / kGroup, k / kGroup}, ctx.allocator());
  ProbeFillKernel<<<Blocks(m * k, 256), 256, 0, ctx.stream()>>>(x.ptr<float>(), n * k, w.ptr<std::uint8_t>(), m * k,
                                                               ws.ptr<float>(), ws.tensor().numel());
  FISSION_LAUNCHED();
  Tensor wt = w.tensor();
  wt.dtype = DType::kF8E4M3;
  Buffer ref(DType::kF32, Shape{n, m}, ctx.allocator()), got(DType::kBF16, Shape{n, m}, ctx.allocator()),
      got32(DType::kF32, Shape{n, m}, ctx.allocator());
  OwnFp8(ctx, QuantizeFor(ctx, x, n, k, true), wt, ws, n, ref);
  std::vector<float> r(n * m), o(n * m);
  ctx.DownloadBytes(r.data(), ref.tensor().data, r.size() * sizeof(float));
  for (int mode = 0; mode < 4; ++mode) {
    if (!CublasFp8(ctx, mode, QuantizeFor(ctx, x, n, k, mode & 1), wt, ws, n, got)) continue;
    Convert(ctx, got, got32);
    ctx.DownloadBytes(o.data(), got32.tensor().data, o.size() * sizeof(float));
    double num = 0, den = 0;
    for (std::size_t i = 0; i < r.size(); ++i) {
      num += (o[i] - r[i]) * static_cast<double>(o[i] - r[i]);
      den += r[i] * static_cast<double>(r[i]);
    }
    if (std::sqrt(num / den) < 1e-2) return mode;
  }
  return kFp8OwnKernel;
}

}  // namespace

void QuantizeFp8(CudaContext& ctx, const Tensor& x, std::uint8_t* codes, float* scales, std::int64_t token_stride,
                 std::int64_t group_stride) {
  const std::int64_t k = x.shape[-1], n = x.numel() / k;
  if (n == 0) return;
  const std::int64_t items = n * Ceil(k, kGroup);
  QuantizeKernel<<<Blocks(items, 8), 256, 0, ctx.stream()>>>(x.data, ElemOf(x), n, k, codes, scales, token_stride,
                                                            group_stride);
  FISSION_LAUNCHED();
}

bool Fp8GemvTakes(std::int64_t k) { return k % 16 == 0; }

Fp8GemvInput QuantizeForGemv(CudaContext& ctx, const Tensor& x, Fp8Activations rule) {
  const std::int64_t k = x.shape[-1], n = x.numel() / k;
  Quantized q = QuantizeFor(ctx, x, n, k, /*token_major=*/true, rule);
  return Fp8GemvInput{std::move(q.codes), std::move(q.scales)};
}

void Fp8GemvGrouped(CudaContext& ctx, const Fp8GemvInput& in, std::span<const Fp8GemvItem> items, std::int64_t m,
                    std::int64_t k, const Tensor& out) {
  FISSION_CHECK(Fp8GemvTakes(k) && in.codes.tensor().shape[-1] == k && out.shape[-1] == m,
                "Fp8GemvGrouped shapes: k ", k, ", m ", m, ", out ", out.shape.ToString());
  // Runs of at most kGemvTokens rows: one grid row each.
  std::vector<Fp8GemvItem> runs;
  for (const Fp8GemvItem& it : items) {
    FISSION_CHECK(it.row0 >= 0 && it.row0 + it.rows <= in.codes.tensor().shape[0], "Fp8GemvGrouped rows");
    for (std::int64_t r = 0; r < it.rows; r += kGemvTokens)
      runs.push_back({it.w, it.w_scale, it.row0 + r, std::min<std::int64_t>(kGemvTokens, it.rows - r)});
  }
  if (runs.empty()) return;
  DeviceMeta table = ctx.Upload(std::span<const Fp8GemvItem>(runs));
  const auto grid_rows = static_cast<std::size_t>(kMaxGridY);
  for (std::size_t first = 0; first < runs.size(); first += grid_rows) {
    const unsigned count = static_cast<unsigned>(std::min(grid_rows, runs.size() - first));
    const dim3 grid(static_cast<unsigned>(Ceil(m, kMmaRows)), count);
    Fp8GemvGroupedKernel<<<grid, kMmaWarps * 32, 0, ctx.stream()>>>(
        in.codes.ptr<std::uint8_t>(), in.scales.ptr<float>(), table.ptr<Fp8GemvItem>() + first, m, k, out.data,
        ElemOf(out));
    FISSION_LAUNCHED();
  }
}

void Fp8GemvRuns(CudaContext& ctx, const Fp8GemvInput& in, const ExpertRun* runs, const std::int32_t* run_count,
                 std::int64_t max_runs, const Fp8ExpertTable& table, std::int64_t m, std::int64_t k,
                 const Tensor& out) {
  FISSION_CHECK(Fp8GemvTakes(k) && in.codes.tensor().shape[-1] == k && out.shape[-1] == m,
                "Fp8GemvRuns shapes: k ", k, ", m ", m, ", out ", out.shape.ToString());
  FISSION_CHECK(max_runs <= kMaxGridY, "Fp8GemvRuns: ", max_runs, " runs do not fit one grid");
  if (max_runs == 0) return;
  const dim3 grid(static_cast<unsigned>(Ceil(m, kMmaRows)), static_cast<unsigned>(max_runs));
  Fp8GemvRunsKernel<<<grid, kMmaWarps * 32, 0, ctx.stream()>>>(in.codes.ptr<std::uint8_t>(), in.scales.ptr<float>(),
                                                               runs, run_count, table.w, table.w_scale, m, k, out.data,
                                                               ElemOf(out));
  FISSION_LAUNCHED();
}

void LinearFp8(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out,
               Fp8Activations rule) {
  FISSION_CHECK(w.dtype == DType::kF8E4M3 && w.rank() == 2 && w_scale.dtype == DType::kF32,
                "LinearFp8 takes e4m3 weights with fp32 block scales, got ", DTypeName(w.dtype), "/",
                DTypeName(w_scale.dtype));
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m && w_scale.numel() == Ceil(m, kGroup) * Ceil(k, kGroup),
                "LinearFp8 shapes x", x.shape.ToString(), " w", w.shape.ToString(), " w_scale",
                w_scale.shape.ToString(), " out", out.shape.ToString());
  if (n == 0) return;
  // Up to 8 tokens (one MMA pass over the weights): the GEMV kernel (cuBLASLt's block-scaled
  // kernels are slow for a handful of tokens). More: cuBLASLt on a zero-padded batch.
  // cuBLASLt's block-scaled GEMM gave wrong results for a k with a partial 128-group on a padded
  // batch (seen on H200, CUDA 13.0): such shapes take the GEMV kernel, in passes of 8 tokens.
  const bool whole_groups = k % kGroup == 0;
  if ((n <= kGemvMaxTokens || !whole_groups) && Fp8GemvTakes(k)) {
    // Few row tiles (q_a, kv_a, the shared expert) would leave most multiprocessors idle and each
    // warp a long serial walk over k: split k over 16 warps a block instead of 4.
    const bool narrow = Ceil(m, kMmaRows) < 2 * ctx.sm_count();
    const unsigned row_tiles = static_cast<unsigned>(Ceil(m, kMmaRows));
    if (n == 1 && rule == Fp8Activations::kPerGroup) {
      // Batch-1 decode: one launch, the token quantized in the GEMV's warps (the same codes).
      if (narrow)
        Fp8GemvOneTokenKernel<kNarrowWarps><<<row_tiles, kNarrowWarps * 32, 0, ctx.stream()>>>(
            x.data, ElemOf(x), w.ptr<std::uint8_t>(), w_scale.ptr<float>(), m, k, out.data, ElemOf(out));
      else
        Fp8GemvOneTokenKernel<kMmaWarps><<<row_tiles, kMmaWarps * 32, 0, ctx.stream()>>>(
            x.data, ElemOf(x), w.ptr<std::uint8_t>(), w_scale.ptr<float>(), m, k, out.data, ElemOf(out));
      FISSION_LAUNCHED();
      return;
    }
    const Fp8GemvInput in = QuantizeForGemv(ctx, x.View(Shape{n, k}), rule);
    for (std::int64_t t0 = 0; t0 < n; t0 += kGemvTokens) {
      const std::int64_t nt = std::min<std::int64_t>(kGemvTokens, n - t0);
      const unsigned blocks = row_tiles;
      const std::uint8_t* xq = in.codes.ptr<std::uint8_t>() + t0 * k;
      const float* xs = in.scales.ptr<float>() + t0 * Ceil(k, kGroup);
      if (narrow) {
        Fp8GemvKernel<kNarrowWarps><<<blocks, kNarrowWarps * 32, 0, ctx.stream()>>>(
            xq, xs, nt, w.ptr<std::uint8_t>(), w_scale.ptr<float>(), m, k, out.data, t0, ElemOf(out));
      } else {
        Fp8GemvKernel<kMmaWarps><<<blocks, kMmaWarps * 32, 0, ctx.stream()>>>(
            xq, xs, nt, w.ptr<std::uint8_t>(), w_scale.ptr<float>(), m, k, out.data, t0, ElemOf(out));
      }
      FISSION_LAUNCHED();
    }
    return;
  }
  if (ctx.fp8_layout < 0) ctx.fp8_layout = ProbeLayout(ctx);
  const int mode = ctx.fp8_layout;
  const bool cublas = mode != kFp8OwnKernel && whole_groups && k >= kCublasMinK;
  if (cublas) {
    // cuBLASLt's block-scaled kernels turned down most token counts that are not a multiple of 4
    // (measured on H200: three in four expert GEMMs of a prefill fell back to the tiled kernel,
    // 25x slower), and are slow below 32 tokens: run a zero-padded batch of at least kPadTokens
    // tokens, a multiple of kPadMultiple, and keep the first n output rows.
    const std::int64_t padded = std::max(kPadTokens, Ceil(n, kPadMultiple) * kPadMultiple);
    std::optional<OpTimer> timer(std::in_place, ctx, ".fp8 quantize", n);
    Buffer x_pad;
    const Tensor* xq = &x;
    if (padded != n) {
      x_pad = Buffer(x.dtype, Shape{padded, k}, ctx.allocator());
      const std::size_t used = DTypeBytes(x.dtype, n * k);
      FISSION_CUDA(cudaMemcpyAsync(x_pad.tensor().data, x.data, used, cudaMemcpyDeviceToDevice, ctx.stream()));
      FISSION_CUDA(cudaMemsetAsync(static_cast<char*>(x_pad.tensor().data) + used, 0, x_pad.tensor().bytes() - used,
                                   ctx.stream()));
      xq = &x_pad.tensor();
    }
    Quantized q = QuantizeFor(ctx, *xq, padded, k, mode & 1, rule);
    timer.emplace(ctx, ".fp8 cuBLASLt", n);
    Buffer tmp;
    const Tensor* d = &out;
    if (out.dtype != DType::kBF16 || padded != n) {
      tmp = Buffer(DType::kBF16, Shape{padded, m}, ctx.allocator());
      d = &tmp.tensor();
    }
    if (CublasFp8(ctx, mode, q, w, w_scale, padded, *d)) {
      if (d != &out) Convert(ctx, d->Rows(0, n), out.View(Shape{n, m}));
      return;
    }
  }
  OpTimer timer(ctx, ".fp8 tiled kernel", n);
  OwnFp8(ctx, QuantizeFor(ctx, x, n, k, true, rule), w, w_scale, n, out);
}

}  // namespace fission::kernels::cuda
