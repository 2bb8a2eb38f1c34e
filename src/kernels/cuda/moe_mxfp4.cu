// MXFP4 routed experts (and Linear) on sm_90, which has no FP4 MMA: the weights stay packed (e2m1
// codes two a byte, one e8m0 scale per 1x32 of a row: 4.25 bits a weight read from HBM) and are
// decoded in registers into int8, where every MXFP4 value is exact once doubled (0, ±1, ±2, ±3,
// ±4, ±6, ±8, ±12). The activations are quantized by the same MX rule as the CPU reference
// (tensor/quantize.h) into doubled int8 codes and an fp32 factor per 1x32, so one
// mma.sync m16n8k32 s8 per 1x32 group computes the group's dot product exactly in int32; the
// group sums are scaled by the weight's and the token's power-of-two scales (an exact product) and
// accumulated in fp32. The only difference from the CPU is the order of the fp32 sums.
//
// Decoding without a 16-entry table: prmt picks bytes from an 8-byte table of the doubled
// magnitudes by the low three bits of each nibble, and a selector nibble with bit 3 set (the e2m1
// sign) gives 0 instead (prmt's sign-replicate mode over a table of positive bytes). So one prmt of
// the codes gives the positive part w+ and one prmt of the codes with flipped signs the negative
// part w-; two MMAs, w+ · x and w- · (-x), add into one accumulator. That is 7 integer operations
// per 8 weights; the integer pipe (64 per clock per multiprocessor) is the budget that matters.
//
// Tile (as fp8.cu and gemv_bf16.cu): a warp per 16 weight rows, up to 8 tokens as the MMA's
// columns, the block's 4 warps splitting k in chunks of 4 groups and adding in warp order. Within
// a group the dot product's k order is free: lane t takes the 8 values [8t, 8t + 8) of its rows
// (one 32-bit word of codes) and of its token, and MMA slots 4t..4t+3 / 16+4t..16+4t+3 take the
// word's low / high four values for A and B alike.
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma_gemv.cuh"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kGroup = 32, kChunkGroups = 4, kWarps = 4, kRows = 16, kTokens = 8;
static_assert(kGemvRunRows == kTokens);

__host__ __device__ inline std::int64_t Ceil(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The activations as the GEMV reads them: per row and group, four 16-byte pieces (one a lane t:
// the doubled codes of values [8t, 8t + 8), then the same codes negated) and one fp32 factor
// 2^(shared exponent - 2) (the two halvings of the doubled codes folded in), groups padded to a
// multiple of kChunkGroups with zeros.
std::int64_t PaddedGroups(std::int64_t k) { return Ceil(Ceil(k, kGroup), kChunkGroups) * kChunkGroups; }

// e2m1 of |v| (v already divided by the block scale), round to nearest, ties to the even code,
// saturating: the thresholds of F32ToF4E2M1 (tensor/dtype.cc), as the doubled value.
__device__ __forceinline__ int DoubledE2m1(float a) {
  if (a <= 0.25f) return 0;
  if (a < 0.75f) return 1;
  if (a <= 1.25f) return 2;
  if (a < 1.75f) return 3;
  if (a <= 2.5f) return 4;
  if (a < 3.5f) return 6;
  if (a <= 5.0f) return 8;
  return 12;
}

// floor(log2(a)) of a finite a > 0, denormals included.
__device__ __forceinline__ int FloorLog2(float a) {
  const std::uint32_t bits = __float_as_uint(a);
  const int e = static_cast<int>(bits >> 23);
  if (e > 0) return e - 127;
  return (31 - __clz(static_cast<int>(bits & 0x7FFFFF))) - 149;
}

// One thread per 8 values (a lane's piece), four threads a group: the amax (finite values only) and
// whether a NaN is present, the OCP MX scale (QuantizeActivations's rule), the codes. Rows are
// source rows row_map[r] of x when row_map is given (the experts' gather folded in). Every thread
// of a warp reaches the shuffles; those past the end store nothing.
__global__ void QuantizeMxfp4Kernel(const void* x, Elem xe, const std::int32_t* row_map, std::int64_t rows,
                                    std::int64_t k, std::int64_t gp, uint4* codes, float* scales) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const bool valid = i < rows * gp * 4;
  const std::int64_t r = valid ? i / (gp * 4) : 0, g = valid ? (i / 4) % gp : 0;
  const int t = static_cast<int>(i & 3);
  const std::int64_t src = row_map != nullptr && valid ? row_map[r] : r;
  const std::int64_t c0 = g * kGroup + 8 * t;
  float v[8];
  float amax = 0.0f;
  int nan = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    v[j] = valid && c0 + j < k ? LoadF(x, src * k + c0 + j, xe) : 0.0f;
    if (isnan(v[j])) nan = 1;
    else if (isfinite(v[j])) amax = fmaxf(amax, fabsf(v[j]));
  }
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    nan |= __shfl_xor_sync(0xffffffffu, nan, o);
  }
  // shared = clamp(floor(log2 amax) - emax(e2m1) = 2, -127, 127); a zero block gets -127 (code 0).
  const int shared = amax > 0.0f ? max(-127, min(127, FloorLog2(amax) - 2)) : -127;
  // 1 / 2^shared as a normal float: shared <= 125 (amax < 2^128), so the exponent stays in range.
  const float inv = __uint_as_float(static_cast<std::uint32_t>(127 - shared) << 23);
  std::uint32_t pos[2] = {0, 0}, neg[2] = {0, 0};
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float scaled = nan ? 0.0f : v[j] * inv;  // exact: a power of two (an infinity saturates below)
    const int q = DoubledE2m1(fabsf(scaled));
    const int s = signbit(scaled) ? -q : q;
    pos[j / 4] |= static_cast<std::uint32_t>(s & 0xFF) << (8 * (j % 4));
    neg[j / 4] |= static_cast<std::uint32_t>((-s) & 0xFF) << (8 * (j % 4));
  }
  if (!valid) return;
  codes[i] = make_uint4(pos[0], pos[1], neg[0], neg[1]);
  if (t == 0) scales[r * gp + g] = nan ? __uint_as_float(0x7FC00000u) : ldexpf(1.0f, shared - 2);
}

__device__ __forceinline__ std::uint32_t Prmt(std::uint32_t a, std::uint32_t b, std::uint32_t sel) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

__device__ __forceinline__ void MmaS8(int (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                      std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The doubled e2m1 magnitudes by code: bytes 0..7 of {kTableHi:kTableLo}.
constexpr std::uint32_t kTableLo = 0x03020100u, kTableHi = 0x0C080604u;

// Positive (flip 0) or negative (flip 0x88888888) part of 8 codes: the low four values, the high four.
__device__ __forceinline__ void Part(std::uint32_t w, std::uint32_t& lo, std::uint32_t& hi) {
  lo = Prmt(kTableLo, kTableHi, w);
  hi = Prmt(kTableLo, kTableHi, w >> 16);
}

// 2^(s - 127) of an e8m0 code, exactly: code 0 is 2^-127 (a denormal), 0xFF is NaN.
__device__ __forceinline__ float E8m0(std::uint32_t s) {
  float f = __uint_as_float(s << 23);          // codes 1..254; 0 gives 0 and 0xFF infinity
  f = fmaxf(f, __uint_as_float(0x00400000u));  // code 0
  return __fmaf_rn(f, 0.0f, f);                // infinity * 0 + infinity: NaN for code 0xFF
}

// One chunk of 4 groups into the accumulators. Pointers are at the chunk's first group: a lane's
// code words of rows a and b (word stride 4 a group), their scale bytes, its token's code pieces
// (stride 4 a group) and the scales of tokens 2t and 2t + 1. kTail: the last chunk of a k that is
// not a multiple of 128, where words past k and groups past the scales read nothing.
template <bool kTail>
__device__ __forceinline__ void Chunk(const std::uint32_t* wa, const std::uint32_t* wb, const std::uint8_t* sa,
                                      const std::uint8_t* sb, const uint4* xr, const float* xs0, const float* xs1,
                                      int words_left, int groups_left, float (&acc)[4]) {
  std::uint32_t a_w[kChunkGroups], b_w[kChunkGroups], a_s[kChunkGroups], b_s[kChunkGroups];
  uint4 xv[kChunkGroups];
#pragma unroll
  for (int j = 0; j < kChunkGroups; ++j) {
    const bool in_k = !kTail || 4 * j < words_left, in_g = !kTail || j < groups_left;
    a_w[j] = in_k ? __ldg(wa + 4 * j) : 0u;
    b_w[j] = in_k ? __ldg(wb + 4 * j) : 0u;
    a_s[j] = in_g ? __ldg(sa + j) : 0u;
    b_s[j] = in_g ? __ldg(sb + j) : 0u;
    xv[j] = __ldg(xr + 4 * j);  // padded with zero codes past k
  }
  const float4 f0 = __ldg(reinterpret_cast<const float4*>(xs0)), f1 = __ldg(reinterpret_cast<const float4*>(xs1));
  const float x0[kChunkGroups] = {f0.x, f0.y, f0.z, f0.w}, x1[kChunkGroups] = {f1.x, f1.y, f1.z, f1.w};
#pragma unroll
  for (int j = 0; j < kChunkGroups; ++j) {
    std::uint32_t pa_lo, pa_hi, pb_lo, pb_hi, na_lo, na_hi, nb_lo, nb_hi;
    Part(a_w[j], pa_lo, pa_hi);
    Part(b_w[j], pb_lo, pb_hi);
    Part(a_w[j] ^ 0x88888888u, na_lo, na_hi);
    Part(b_w[j] ^ 0x88888888u, nb_lo, nb_hi);
    int d[4] = {0, 0, 0, 0};
    MmaS8(d, pa_lo, pb_lo, pa_hi, pb_hi, xv[j].x, xv[j].y);
    MmaS8(d, na_lo, nb_lo, na_hi, nb_hi, xv[j].z, xv[j].w);
    const float fa = E8m0(a_s[j]), fb = E8m0(b_s[j]);
    // |d| <= 32 * 12 * 12: exact in fp32; times two powers of two: exact; one rounding per add.
    acc[0] = __fmaf_rn(__int2float_rn(d[0]), fa * x0[j], acc[0]);
    acc[1] = __fmaf_rn(__int2float_rn(d[1]), fa * x1[j], acc[1]);
    acc[2] = __fmaf_rn(__int2float_rn(d[2]), fb * x0[j], acc[2]);
    acc[3] = __fmaf_rn(__int2float_rn(d[3]), fb * x1[j], acc[3]);
  }
}

// 16 weight rows [row0, row0 + 16) of w (packed codes [m, k], scales [m, groups]) for up to 8 rows
// of quantized activations (xq, xs: the run's first row), stored into out rows out_row0 + token.
// Rows past m and tokens past n read row 0 and token 0 instead (in bounds, never stored), so the
// loads need no guards except in a partial last chunk of k.
__device__ __forceinline__ void Mxfp4MmaTile(const uint4* xq, const float* xs, std::int64_t n,
                                             const std::uint8_t* w, const std::uint8_t* ws, std::int64_t m,
                                             std::int64_t k, std::int64_t gp, std::int64_t row0, void* out,
                                             std::int64_t out_row0, Elem oe) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  const std::int64_t groups = Ceil(k, kGroup), ra = row0 + gid, rb = ra + 8;
  const std::int64_t rai = ra < m ? ra : 0, rbi = rb < m ? rb : 0;
  const std::int64_t xt = gid < n ? gid : 0, t0 = 2 * t < n ? 2 * t : 0, t1 = 2 * t + 1 < n ? 2 * t + 1 : 0;
  // k % 8 == 0: every row starts on a 4-byte word, and word 4g + t holds values [32g + 8t, +8).
  const std::int64_t c0 = warp;
  const auto* wa = reinterpret_cast<const std::uint32_t*>(w + rai * (k / 2)) + 16 * c0 + t;
  const auto* wb = reinterpret_cast<const std::uint32_t*>(w + rbi * (k / 2)) + 16 * c0 + t;
  const std::uint8_t* sa = ws + rai * groups + 4 * c0;
  const std::uint8_t* sb = ws + rbi * groups + 4 * c0;
  const uint4* xr = xq + xt * gp * 4 + 16 * c0 + t;
  const float* xs0 = xs + t0 * gp + 4 * c0;
  const float* xs1 = xs + t1 * gp + 4 * c0;
  // Chunks wholly inside k, then at most one partial chunk.
  const std::int64_t full = k / (kChunkGroups * kGroup), chunks = gp / kChunkGroups;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::int64_t c = c0;
#pragma unroll 2
  for (; c < full; c += kWarps) {
    Chunk<false>(wa, wb, sa, sb, xr, xs0, xs1, 0, 0, acc);
    wa += 16 * kWarps;
    wb += 16 * kWarps;
    sa += 4 * kWarps;
    sb += 4 * kWarps;
    xr += 16 * kWarps;
    xs0 += 4 * kWarps;
    xs1 += 4 * kWarps;
  }
  if (c < chunks) {
    // Group j's word is in k while 16c + t + 4j < k / 8; its scale while 4c + j < groups.
    const int words_left = static_cast<int>(k / 8 - 16 * c - t);
    const int groups_left = static_cast<int>(groups - kChunkGroups * c);
    Chunk<true>(wa, wb, sa, sb, xr, xs0, xs1, words_left, groups_left, acc);
  }
  StoreMmaTile<kWarps>(acc, n, m, row0, out, out_row0, oe);
}

// The routed experts: blockIdx.y is a run of at most 8 rows of one expert (listed on the device,
// moe.cu), blocks past the listed count return at once, weights from the experts' pointer tables.
__global__ void __launch_bounds__(kWarps * 32) Mxfp4GemvRunsKernel(const uint4* xq, const float* xs,
                                                                 const ExpertRun* runs, const std::int32_t* run_count,
                                                                 const std::uint8_t* const* w,
                                                                 const std::uint8_t* const* w_scale, std::int64_t m,
                                                                 std::int64_t k, std::int64_t gp, void* out, Elem oe) {
  if (static_cast<std::int32_t>(blockIdx.y) >= *run_count) return;
  const ExpertRun run = runs[blockIdx.y];
  Mxfp4MmaTile(xq + run.row0 * gp * 4, xs + run.row0 * gp, run.rows, w[run.expert], w_scale[run.expert], m, k, gp,
               blockIdx.x * static_cast<std::int64_t>(kRows), out, run.row0, oe);
}

// One weight (Linear): blockIdx.y is a tile of 8 tokens.
__global__ void __launch_bounds__(kWarps * 32) Mxfp4GemvKernel(const uint4* xq, const float* xs, std::int64_t n,
                                                             const std::uint8_t* w, const std::uint8_t* w_scale,
                                                             std::int64_t m, std::int64_t k, std::int64_t gp,
                                                             void* out, Elem oe) {
  const std::int64_t t0 = blockIdx.y * static_cast<std::int64_t>(kTokens);
  Mxfp4MmaTile(xq + t0 * gp * 4, xs + t0 * gp, n - t0 < kTokens ? n - t0 : kTokens, w, w_scale, m, k, gp,
               blockIdx.x * static_cast<std::int64_t>(kRows), out, t0, oe);
}

constexpr std::int64_t kMaxGridY = 65535;

void CheckMxfp4(const Tensor& w, const Tensor& s, std::int64_t m, std::int64_t k, const char* what, std::size_t e) {
  FISSION_CHECK(w.dtype == DType::kF4E2M1 && w.rank() == 2 && w.shape[0] == m && w.shape[1] == k &&
                    s.dtype == DType::kE8M0 && s.rank() == 2 && s.shape[0] == m && s.shape[1] == Ceil(k, kGroup) &&
                    (reinterpret_cast<std::uintptr_t>(w.data) & 3u) == 0,
                what, " ", e, " is ", DTypeName(w.dtype), w.shape.ToString(), " with scales ", DTypeName(s.dtype),
                s.shape.ToString(), "; expected MXFP4 [", m, ", ", k, "] with e8m0 scales [", m, ", ",
                Ceil(k, kGroup), "], 4-byte aligned");
}

// The experts' code and scale pointers on the device, one table per weight set, kept by the context
// (built by an eager call; a capture finds it there).
struct Mxfp4Table {
  const std::uint8_t* const* w;
  const std::uint8_t* const* w_scale;
};
Mxfp4Table ExpertTable(CudaContext& ctx, std::span<const Tensor> w, std::span<const Tensor> w_scale,
                       const char* what) {
  std::vector<const void*> pointers;
  pointers.reserve(2 * w.size());
  for (const Tensor& t : w) pointers.push_back(t.data);
  for (const Tensor& t : w_scale) pointers.push_back(t.data);
  const void* const* table = ctx.PointerTable(pointers, what);
  return {reinterpret_cast<const std::uint8_t* const*>(table),
          reinterpret_cast<const std::uint8_t* const*>(table + w.size())};
}

void GemvRuns(CudaContext& ctx, const Mxfp4Input& in, const ExpertRows& rows, const Mxfp4Table& table, std::int64_t m,
              std::int64_t k, const Tensor& out) {
  Mxfp4GemvRuns(ctx, in, rows.runs.ptr<ExpertRun>(), rows.run_count.ptr<std::int32_t>(), rows.max_runs,
                reinterpret_cast<const void* const*>(table.w), reinterpret_cast<const void* const*>(table.w_scale), m,
                k, out);
}

// One call's experts, every step on the device: the permutation and its runs, the activations
// quantized straight from their tokens' rows, both products, silu·up and the combine in fp32.
void RoutedExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   const Mxfp4Table& gu_table, const Mxfp4Table& down_table, std::int64_t inter, int experts,
                   const Tensor& out) {
  const std::int64_t hidden = x.shape[1];
  std::optional<OpTimer> timer(std::in_place, ctx, ".moe_mxfp4 device plan", x.shape[0]);
  const ExpertRows rows = PermuteByExpertOnDevice(ctx, topk_ids, experts);
  timer.emplace(ctx, ".moe_mxfp4 GEMV runs", rows.max_runs);
  Buffer gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kF32, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GemvRuns(ctx, QuantizeMxfp4(ctx, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs), rows, gu_table, 2 * inter,
           hidden, gu);
  SiluMul(ctx, gu, act);
  GemvRuns(ctx, QuantizeMxfp4(ctx, act, nullptr, rows.pairs), rows, down_table, hidden, inter, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace

bool Mxfp4GemvTakes(std::int64_t k) { return k % 8 == 0; }

Mxfp4Input QuantizeMxfp4(CudaContext& ctx, const Tensor& x, const std::int32_t* row_map, std::int64_t rows) {
  const std::int64_t k = x.shape[-1], gp = PaddedGroups(k);
  FISSION_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "QuantizeMxfp4 takes fp32 or bf16, got ",
                DTypeName(x.dtype));
  Mxfp4Input in;
  in.k = k;
  in.codes = Buffer(DType::kU8, Shape{std::max<std::int64_t>(rows, 1), gp * 4 * 16}, ctx.allocator());
  in.scales = Buffer(DType::kF32, Shape{std::max<std::int64_t>(rows, 1), gp}, ctx.allocator());
  const std::int64_t threads = rows * gp * 4;
  if (threads == 0) return in;
  QuantizeMxfp4Kernel<<<Blocks(threads, 256), 256, 0, ctx.stream()>>>(x.data, ElemOf(x), row_map, rows, k, gp,
                                                                     in.codes.ptr<uint4>(), in.scales.ptr<float>());
  FISSION_LAUNCHED();
  return in;
}

void Mxfp4GemvRuns(CudaContext& ctx, const Mxfp4Input& in, const ExpertRun* runs, const std::int32_t* run_count,
                   std::int64_t max_runs, const void* const* expert_codes, const void* const* expert_scales,
                   std::int64_t m, std::int64_t k, const Tensor& out) {
  FISSION_CHECK(in.k == k && Mxfp4GemvTakes(k) && out.shape[-1] == m && max_runs <= kMaxGridY,
                "Mxfp4GemvRuns: k ", k, " (input ", in.k, "), m ", m, ", out ", out.shape.ToString(), ", ", max_runs,
                " runs");
  if (max_runs == 0) return;
  const dim3 grid(static_cast<unsigned>(Ceil(m, kRows)), static_cast<unsigned>(max_runs));
  Mxfp4GemvRunsKernel<<<grid, kWarps * 32, 0, ctx.stream()>>>(
      in.codes.ptr<uint4>(), in.scales.ptr<float>(), runs, run_count,
      reinterpret_cast<const std::uint8_t* const*>(expert_codes),
      reinterpret_cast<const std::uint8_t* const*>(expert_scales), m, k, PaddedGroups(k), out.data, ElemOf(out));
  FISSION_LAUNCHED();
}

void LinearMxfp4(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  CheckMxfp4(w, w_scale, m, k, "LinearMxfp4: the weight", 0);
  FISSION_CHECK(Mxfp4GemvTakes(k), "Linear: the CUDA backend's MXFP4 kernel takes k % 8 == 0 (rows start on a ",
                "4-byte word of codes); this weight has k = ", k);
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m, "LinearMxfp4 shapes x", x.shape.ToString(), " w",
                w.shape.ToString(), " out", out.shape.ToString());
  if (n == 0) return;
  const Mxfp4Input in = QuantizeMxfp4(ctx, x.View(Shape{n, k}), nullptr, n);
  const std::int64_t gp = PaddedGroups(k), tiles = Ceil(n, kTokens);
  for (std::int64_t first = 0; first < tiles; first += kMaxGridY) {
    const std::int64_t count = std::min(kMaxGridY, tiles - first), t0 = first * kTokens;
    const dim3 grid(static_cast<unsigned>(Ceil(m, kRows)), static_cast<unsigned>(count));
    Mxfp4GemvKernel<<<grid, kWarps * 32, 0, ctx.stream()>>>(
        in.codes.ptr<uint4>() + t0 * gp * 4, in.scales.ptr<float>() + t0 * gp, n - t0, w.ptr<std::uint8_t>(),
        w_scale.ptr<std::uint8_t>(), m, k, gp, static_cast<char*>(out.data) + DTypeBytes(out.dtype, t0 * m),
        ElemOf(out));
    FISSION_LAUNCHED();
  }
}

void MoeExpertsMxfp4(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                     std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                     std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  const int experts = static_cast<int>(gate_up.size());
  FISSION_CHECK(experts > 0 && down.size() == gate_up.size() && gate_up_scale.size() == gate_up.size() &&
                    down_scale.size() == down.size() && topk_weights.dtype == DType::kF32 &&
                    topk_ids.dtype == DType::kI32 && topk_ids.rank() == 2 && topk_ids.shape[0] == n &&
                    topk_weights.shape == topk_ids.shape && out.numel() == n * hidden,
                "MoeExpertsMxfp4 arguments");
  const std::int64_t inter = down[0].shape[1];
  for (std::size_t e = 0; e < gate_up.size(); ++e) {
    CheckMxfp4(gate_up[e], gate_up_scale[e], 2 * inter, hidden, "MoeExpertsMxfp4: gate_up of expert", e);
    CheckMxfp4(down[e], down_scale[e], hidden, inter, "MoeExpertsMxfp4: down of expert", e);
  }
  FISSION_CHECK(Mxfp4GemvTakes(hidden) && Mxfp4GemvTakes(inter),
                "MoeExperts: the CUDA backend's MXFP4 kernel takes k % 8 == 0 in both products (rows start on a "
                "4-byte word of codes); these experts have hidden ", hidden, " and intermediate ", inter);
  if (n == 0) return;
  const Mxfp4Table gu_table = ExpertTable(ctx, gate_up, gate_up_scale, "MoeExpertsMxfp4 (gate_up)");
  const Mxfp4Table down_table = ExpertTable(ctx, down, down_scale, "MoeExpertsMxfp4 (down)");
  // Every size plans on the device (same kernels, no host wait); a call whose runs would not fit
  // one grid goes in slices of tokens (a prefill of tens of thousands of tokens).
  const std::int64_t top_k = topk_ids.shape[1];
  std::int64_t slice = n;
  while (slice > 1 && MaxExpertRuns(slice * top_k, experts) > kMaxGridY) slice = (slice + 1) / 2;
  for (std::int64_t t0 = 0; t0 < n; t0 += slice) {
    const std::int64_t t1 = std::min(n, t0 + slice);
    RoutedExperts(ctx, x.Rows(t0, t1), topk_ids.Rows(t0, t1), topk_weights.Rows(t0, t1), gu_table, down_table,
                  inter, experts, out.View(Shape{n, hidden}).Rows(t0, t1));
  }
}

}  // namespace fission::kernels::cuda
