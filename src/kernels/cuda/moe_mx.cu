// OCP microscaled weights (MXFP4: e2m1 codes two a byte; MXFP8: e4m3 codes, one a byte; one e8m0
// scale per 1x32 of a row) on sm_90, read as stored: 4.25 or 8.25 bits a weight from HBM. The
// activations are quantized by the weight's own MX rule, as the CPU reference does
// (tensor/quantize.h), and one mma.sync m16n8k32 per 1x32 group computes the group's dot product;
// the group sums are scaled by the weight's and the token's power-of-two scales (an exact product)
// and accumulated in fp32.
//
// MXFP4 (sm_90 has no FP4 MMA): the codes are decoded in registers into int8, where every MXFP4
// value is exact once doubled (0, ±1, ±2, ±3, ±4, ±6, ±8, ±12), and the activations are quantized
// into doubled int8 codes with an fp32 factor per 1x32, so the s8 MMA sums each group exactly in
// int32. The only difference from the CPU is the order of the fp32 sums. Decoding without a
// 16-entry table: prmt picks bytes from an 8-byte table of the doubled magnitudes by the low three
// bits of each nibble, and a selector nibble with bit 3 set (the e2m1 sign) gives 0 instead (prmt's
// sign-replicate mode over a table of positive bytes). So one prmt of the codes gives the positive
// part w+ and one prmt of the codes with flipped signs the negative part w-; two MMAs, w+ · x and
// w- · (-x), add into one accumulator. That is 7 integer operations per 8 weights; the integer pipe
// (64 per clock per multiprocessor) is the budget that matters.
//
// MXFP8: the e4m3 codes go to the e4m3 MMA as they are (every product of two codes is exact; the
// tensor core sums a group's 32 products in fp32 with its own, shorter, internal alignment, so a
// group sum can differ from the CPU's in its last bits: the test bounds say how far).
//
// Tile (as fp8.cu and gemv_bf16.cu): a warp per 16 weight rows, up to 8 tokens as the MMA's
// columns, the block's 4 warps splitting k in chunks of 4 groups and adding in warp order. Within
// a group the dot product's k order is free: lane t takes the 8 values [8t, 8t + 8) of its rows
// (one 32-bit word of e2m1 codes, one 64-bit word of e4m3 codes) and of its token, and MMA slots
// 4t..4t+3 / 16+4t..16+4t+3 take the word's low / high four values for A and B alike.
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/e2m1.cuh"
#include "kernels/cuda/mma_gemv.cuh"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kGroup = 32, kChunkGroups = 4, kWarps = 4, kRows = 16, kTokens = 8;
static_assert(kGemvRunRows == kTokens);

__host__ __device__ inline std::int64_t Ceil(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// The activations as the GEMV reads them: per row and group, four pieces (one a lane t, the values
// [8t, 8t + 8): E2m1::Piece / E4m3::Piece below) and one fp32 factor per group (2^(shared exponent
// + E::kFactorShift)), groups padded to a multiple of kChunkGroups with zeros.
std::int64_t PaddedGroups(std::int64_t k) { return Ceil(Ceil(k, kGroup), kChunkGroups) * kChunkGroups; }

// floor(log2(a)) of a finite a > 0, denormals included.
__device__ __forceinline__ int FloorLog2(float a) {
  const std::uint32_t bits = __float_as_uint(a);
  const int e = static_cast<int>(bits >> 23);
  if (e > 0) return e - 127;
  return (31 - __clz(static_cast<int>(bits & 0x7FFFFF))) - 149;
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

// What differs between the two element types. Word: a lane's 8 weight codes of one row and group;
// Piece: a lane's 8 activation values of one token and group as the GEMV reads them; kEmax: the
// exponent of the element's largest binade (the MX rule); kFactorShift: the activation factor is
// 2^(shared + kFactorShift).
struct E2m1 {
  using Word = std::uint32_t;
  // The doubled int8 codes of the 8 values, then the same codes negated.
  using Piece = uint4;
  static constexpr int kEmax = 2, kFactorShift = -2;  // both halvings of a doubled product folded in
  __host__ __device__ static constexpr std::int64_t RowBytes(std::int64_t k) { return k / 2; }
  __device__ static Word Zero() { return 0u; }
  __device__ static Piece Encode(const float (&scaled)[8]) {
    std::uint32_t pos[2] = {0, 0}, neg[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int q = DoubledE2m1(fabsf(scaled[j]));
      const int s = signbit(scaled[j]) ? -q : q;
      pos[j / 4] |= static_cast<std::uint32_t>(s & 0xFF) << (8 * (j % 4));
      neg[j / 4] |= static_cast<std::uint32_t>((-s) & 0xFF) << (8 * (j % 4));
    }
    return make_uint4(pos[0], pos[1], neg[0], neg[1]);
  }
  // Rows a and b times the token's values: the group's four accumulator entries.
  __device__ static void Dot(Word a, Word b, Piece x, float (&out)[4]) {
    std::uint32_t pa_lo, pa_hi, pb_lo, pb_hi, na_lo, na_hi, nb_lo, nb_hi;
    Part(a, pa_lo, pa_hi);
    Part(b, pb_lo, pb_hi);
    Part(a ^ 0x88888888u, na_lo, na_hi);
    Part(b ^ 0x88888888u, nb_lo, nb_hi);
    int d[4] = {0, 0, 0, 0};
    MmaS8(d, pa_lo, pb_lo, pa_hi, pb_hi, x.x, x.y);
    MmaS8(d, na_lo, nb_lo, na_hi, nb_hi, x.z, x.w);
    // |d| <= 32 * 12 * 12: exact in fp32.
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = __int2float_rn(d[i]);
  }
};

struct E4m3 {
  using Word = uint2;
  using Piece = uint2;  // the e4m3 codes of the 8 values
  static constexpr int kEmax = 8, kFactorShift = 0;
  __host__ __device__ static constexpr std::int64_t RowBytes(std::int64_t k) { return k; }
  __device__ static Word Zero() { return make_uint2(0u, 0u); }
  __device__ static Piece Encode(const float (&scaled)[8]) {
    std::uint32_t word[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; ++j)  // round to nearest even, saturating: F32ToF8E4M3 (tensor/dtype.cc)
      word[j / 4] |= static_cast<std::uint32_t>(__nv_cvt_float_to_fp8(scaled[j], __NV_SATFINITE, __NV_E4M3))
                     << (8 * (j % 4));
    return make_uint2(word[0], word[1]);
  }
  __device__ static void Dot(Word a, Word b, Piece x, float (&out)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) out[i] = 0.0f;
    MmaE4m3(out, a.x, b.x, a.y, b.y, x.x, x.y);
  }
};

// One thread per 8 values (a lane's piece), four threads a group: the amax (finite values only) and
// whether a NaN is present, the OCP MX scale (QuantizeActivations's rule), the codes. Rows are
// source rows row_map[r] of x when row_map is given (the experts' gather folded in). Every thread
// of a warp reaches the shuffles; those past the end store nothing.
template <class E>
__global__ void QuantizeMxKernel(const void* x, Elem xe, const std::int32_t* row_map, std::int64_t rows,
                                 std::int64_t k, std::int64_t gp, typename E::Piece* codes, float* scales) {
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
  // shared = clamp(floor(log2 amax) - emax, -127, 127); a zero block gets -127 (code 0).
  const int shared = amax > 0.0f ? max(-127, min(127, FloorLog2(amax) - E::kEmax)) : -127;
  // 1 / 2^shared as a normal float: shared <= 127 - emax (amax < 2^128), so the exponent stays in range.
  const float inv = __uint_as_float(static_cast<std::uint32_t>(127 - shared) << 23);
  float scaled[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) scaled[j] = nan ? 0.0f : v[j] * inv;  // exact: a power of two (infinities saturate)
  const typename E::Piece piece = E::Encode(scaled);
  if (!valid) return;
  codes[i] = piece;
  if (t == 0) scales[r * gp + g] = nan ? __uint_as_float(0x7FC00000u) : ldexpf(1.0f, shared + E::kFactorShift);
}

// 2^(s - 127) of an e8m0 code, exactly: code 0 is 2^-127 (a denormal), 0xFF is NaN.
__device__ __forceinline__ float E8m0(std::uint32_t s) {
  float f = __uint_as_float(s << 23);          // codes 1..254; 0 gives 0 and 0xFF infinity
  f = fmaxf(f, __uint_as_float(0x00400000u));  // code 0
  return __fmaf_rn(f, 0.0f, f);                // infinity * 0 + infinity: NaN for code 0xFF
}

// One chunk of 4 groups into the accumulators. Pointers are at the chunk's first group: a lane's
// code words of rows a and b (word stride 4 a group), their scale bytes, its token's pieces
// (stride 4 a group) and the scales of tokens 2t and 2t + 1. kTail: the last chunk of a k that is
// not a multiple of 128, where words past k and groups past the scales read nothing.
template <class E, bool kTail>
__device__ __forceinline__ void Chunk(const typename E::Word* wa, const typename E::Word* wb, const std::uint8_t* sa,
                                      const std::uint8_t* sb, const typename E::Piece* xr, const float* xs0,
                                      const float* xs1, int words_left, int groups_left, float (&acc)[4]) {
  typename E::Word a_w[kChunkGroups], b_w[kChunkGroups];
  std::uint32_t a_s[kChunkGroups], b_s[kChunkGroups];
  typename E::Piece xv[kChunkGroups];
#pragma unroll
  for (int j = 0; j < kChunkGroups; ++j) {
    const bool in_k = !kTail || 4 * j < words_left, in_g = !kTail || j < groups_left;
    a_w[j] = in_k ? __ldg(wa + 4 * j) : E::Zero();
    b_w[j] = in_k ? __ldg(wb + 4 * j) : E::Zero();
    a_s[j] = in_g ? __ldg(sa + j) : 0u;
    b_s[j] = in_g ? __ldg(sb + j) : 0u;
    xv[j] = __ldg(xr + 4 * j);  // padded with zero codes past k
  }
  const float4 f0 = __ldg(reinterpret_cast<const float4*>(xs0)), f1 = __ldg(reinterpret_cast<const float4*>(xs1));
  const float x0[kChunkGroups] = {f0.x, f0.y, f0.z, f0.w}, x1[kChunkGroups] = {f1.x, f1.y, f1.z, f1.w};
#pragma unroll
  for (int j = 0; j < kChunkGroups; ++j) {
    float d[4];
    E::Dot(a_w[j], b_w[j], xv[j], d);
    const float fa = E8m0(a_s[j]), fb = E8m0(b_s[j]);
    // Times two powers of two: exact; one rounding per add.
    acc[0] = __fmaf_rn(d[0], fa * x0[j], acc[0]);
    acc[1] = __fmaf_rn(d[1], fa * x1[j], acc[1]);
    acc[2] = __fmaf_rn(d[2], fb * x0[j], acc[2]);
    acc[3] = __fmaf_rn(d[3], fb * x1[j], acc[3]);
  }
}

// 16 weight rows [row0, row0 + 16) of w (codes [m, k], scales [m, groups]) for up to 8 rows of
// quantized activations (xq, xs: the run's first row), stored into out rows out_row0 + token.
// Rows past m and tokens past n read row 0 and token 0 instead (in bounds, never stored), so the
// loads need no guards except in a partial last chunk of k.
template <class E>
__device__ __forceinline__ void MxMmaTile(const typename E::Piece* xq, const float* xs, std::int64_t n,
                                          const std::uint8_t* w, const std::uint8_t* ws, std::int64_t m,
                                          std::int64_t k, std::int64_t gp, std::int64_t row0, void* out,
                                          std::int64_t out_row0, Elem oe) {
  using Word = typename E::Word;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  const std::int64_t groups = Ceil(k, kGroup), ra = row0 + gid, rb = ra + 8;
  const std::int64_t rai = ra < m ? ra : 0, rbi = rb < m ? rb : 0;
  const std::int64_t xt = gid < n ? gid : 0, t0 = 2 * t < n ? 2 * t : 0, t1 = 2 * t + 1 < n ? 2 * t + 1 : 0;
  // k % 8 == 0: every row starts on a word, and word 4g + t holds values [32g + 8t, +8).
  const std::int64_t c0 = warp;
  const auto* wa = reinterpret_cast<const Word*>(w + rai * E::RowBytes(k)) + 16 * c0 + t;
  const auto* wb = reinterpret_cast<const Word*>(w + rbi * E::RowBytes(k)) + 16 * c0 + t;
  const std::uint8_t* sa = ws + rai * groups + 4 * c0;
  const std::uint8_t* sb = ws + rbi * groups + 4 * c0;
  const typename E::Piece* xr = xq + xt * gp * 4 + 16 * c0 + t;
  const float* xs0 = xs + t0 * gp + 4 * c0;
  const float* xs1 = xs + t1 * gp + 4 * c0;
  // Chunks wholly inside k, then at most one partial chunk.
  const std::int64_t full = k / (kChunkGroups * kGroup), chunks = gp / kChunkGroups;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::int64_t c = c0;
#pragma unroll 2
  for (; c < full; c += kWarps) {
    Chunk<E, false>(wa, wb, sa, sb, xr, xs0, xs1, 0, 0, acc);
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
    Chunk<E, true>(wa, wb, sa, sb, xr, xs0, xs1, words_left, groups_left, acc);
  }
  StoreMmaTile<kWarps>(acc, n, m, row0, out, out_row0, oe);
}

// The routed experts: blockIdx.y is a run of at most 8 rows of one expert (listed on the device,
// moe.cu), blocks past the listed count return at once, weights from the experts' pointer tables.
template <class E>
__global__ void __launch_bounds__(kWarps * 32) MxGemvRunsKernel(const typename E::Piece* xq, const float* xs,
                                                              const ExpertRun* runs, const std::int32_t* run_count,
                                                              const std::uint8_t* const* w,
                                                              const std::uint8_t* const* w_scale, std::int64_t m,
                                                              std::int64_t k, std::int64_t gp, void* out, Elem oe) {
  if (static_cast<std::int32_t>(blockIdx.y) >= *run_count) return;
  const ExpertRun run = runs[blockIdx.y];
  MxMmaTile<E>(xq + run.row0 * gp * 4, xs + run.row0 * gp, run.rows, w[run.expert], w_scale[run.expert], m, k, gp,
               blockIdx.x * static_cast<std::int64_t>(kRows), out, run.row0, oe);
}

// One weight (Linear): blockIdx.y is a tile of 8 tokens.
template <class E>
__global__ void __launch_bounds__(kWarps * 32) MxGemvKernel(const typename E::Piece* xq, const float* xs,
                                                          std::int64_t n, const std::uint8_t* w,
                                                          const std::uint8_t* w_scale, std::int64_t m, std::int64_t k,
                                                          std::int64_t gp, void* out, Elem oe) {
  const std::int64_t t0 = blockIdx.y * static_cast<std::int64_t>(kTokens);
  MxMmaTile<E>(xq + t0 * gp * 4, xs + t0 * gp, n - t0 < kTokens ? n - t0 : kTokens, w, w_scale, m, k, gp,
               blockIdx.x * static_cast<std::int64_t>(kRows), out, t0, oe);
}


// f(E2m1{}) or f(E4m3{}) for the codes' type: the one place a DType picks the kernels.
template <class F>
void WithCodes(DType codes, const char* what, F&& f) {
  if (codes == DType::kF4E2M1) return f(E2m1{});
  if (codes == DType::kF8E4M3) return f(E4m3{});
  Fail(what, ": MX codes are e2m1 (MXFP4) or e4m3 (MXFP8), got ", DTypeName(codes));
}

const char* FormatName(DType codes) { return codes == DType::kF4E2M1 ? "MXFP4" : "MXFP8"; }

// Words of 8 codes are 4 (e2m1) or 8 (e4m3) bytes: rows of codes start on one when k % 8 == 0 and
// the base pointer is aligned to a word.
std::size_t WordBytes(DType codes) { return codes == DType::kF4E2M1 ? 4 : 8; }

void CheckMx(const Tensor& w, const Tensor& s, DType codes, std::int64_t m, std::int64_t k, const char* what,
             std::size_t e) {
  const std::size_t word = WordBytes(codes);
  FISSION_CHECK(w.dtype == codes && w.rank() == 2 && w.shape[0] == m && w.shape[1] == k &&
                    s.dtype == DType::kE8M0 && s.rank() == 2 && s.shape[0] == m && s.shape[1] == Ceil(k, kGroup) &&
                    (reinterpret_cast<std::uintptr_t>(w.data) & (word - 1)) == 0,
                what, " ", e, " is ", DTypeName(w.dtype), w.shape.ToString(), " with scales ", DTypeName(s.dtype),
                s.shape.ToString(), "; expected ", FormatName(codes), " [", m, ", ", k, "] with e8m0 scales [", m,
                ", ", Ceil(k, kGroup), "], ", word, "-byte aligned");
}

// The experts' code and scale pointers on the device, one table per weight set, kept by the context
// (built by an eager call; a capture finds it there).
struct MxTable {
  const std::uint8_t* const* w;
  const std::uint8_t* const* w_scale;
};
MxTable ExpertTable(CudaContext& ctx, std::span<const Tensor> w, std::span<const Tensor> w_scale, const char* what) {
  const void* const* table = ctx.PointerTable(w, w_scale, what);
  return {reinterpret_cast<const std::uint8_t* const*>(table),
          reinterpret_cast<const std::uint8_t* const*>(table + w.size())};
}

void GemvRuns(CudaContext& ctx, const MxInput& in, const ExpertRows& rows, const MxTable& table, std::int64_t m,
              std::int64_t k, const Tensor& out) {
  MxGemvRuns(ctx, in, rows.runs.ptr<ExpertRun>(), rows.run_count.ptr<std::int32_t>(), rows.max_runs,
             reinterpret_cast<const void* const*>(table.w), reinterpret_cast<const void* const*>(table.w_scale), m, k,
             out);
}

// One call's experts, every step on the device: the permutation and its runs, the activations
// quantized straight from their tokens' rows, both products, silu·up and the combine in fp32.
void RoutedExperts(CudaContext& ctx, DType codes, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   const MxTable& gu_table, const MxTable& down_table, std::int64_t inter, int experts,
                   const Tensor& out, float limit) {
  const std::int64_t hidden = x.shape[1];
  std::optional<OpTimer> timer(std::in_place, ctx, ".moe_mx device plan", x.shape[0]);
  const ExpertRows rows = PermuteByExpertOnDevice(ctx, topk_ids, experts);
  timer.emplace(ctx, ".moe_mx GEMV runs", rows.max_runs);
  Buffer gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kF32, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GemvRuns(ctx, QuantizeMx(ctx, codes, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs), rows, gu_table,
           2 * inter, hidden, gu);
  SiluMul(ctx, gu, act, limit);
  GemvRuns(ctx, QuantizeMx(ctx, codes, act, nullptr, rows.pairs), rows, down_table, hidden, inter, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace

bool MxGemvTakes(std::int64_t k) { return k % 8 == 0; }

MxInput QuantizeMx(CudaContext& ctx, DType codes, const Tensor& x, const std::int32_t* row_map, std::int64_t rows) {
  const std::int64_t k = x.shape[-1], gp = PaddedGroups(k);
  FISSION_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16, "QuantizeMx takes fp32 or bf16, got ",
                DTypeName(x.dtype));
  MxInput in;
  in.k = k;
  in.codes_type = codes;
  WithCodes(codes, "QuantizeMx", [&](auto e) {
    using E = decltype(e);
    using Piece = typename E::Piece;
    const std::int64_t piece_bytes = static_cast<std::int64_t>(sizeof(Piece));
    in.codes = Buffer(DType::kU8, Shape{std::max<std::int64_t>(rows, 1), gp * 4 * piece_bytes}, ctx.allocator());
    in.scales = Buffer(DType::kF32, Shape{std::max<std::int64_t>(rows, 1), gp}, ctx.allocator());
    const std::int64_t threads = rows * gp * 4;
    if (threads == 0) return;
    QuantizeMxKernel<E><<<Blocks(threads, 256), 256, 0, ctx.stream()>>>(
        x.data, ElemOf(x), row_map, rows, k, gp, in.codes.ptr<Piece>(), in.scales.ptr<float>());
    FISSION_LAUNCHED();
  });
  return in;
}

void MxGemvRuns(CudaContext& ctx, const MxInput& in, const ExpertRun* runs, const std::int32_t* run_count,
                std::int64_t max_runs, const void* const* expert_codes, const void* const* expert_scales,
                std::int64_t m, std::int64_t k, const Tensor& out) {
  FISSION_CHECK(in.k == k && MxGemvTakes(k) && out.shape[-1] == m && max_runs <= kMaxGridY, "MxGemvRuns: k ", k,
                " (input ", in.k, "), m ", m, ", out ", out.shape.ToString(), ", ", max_runs, " runs");
  if (max_runs == 0) return;
  const dim3 grid(static_cast<unsigned>(Ceil(m, kRows)), static_cast<unsigned>(max_runs));
  WithCodes(in.codes_type, "MxGemvRuns", [&](auto e) {
    using E = decltype(e);
    MxGemvRunsKernel<E><<<grid, kWarps * 32, 0, ctx.stream()>>>(
        in.codes.ptr<typename E::Piece>(), in.scales.ptr<float>(), runs, run_count,
        reinterpret_cast<const std::uint8_t* const*>(expert_codes),
        reinterpret_cast<const std::uint8_t* const*>(expert_scales), m, k, PaddedGroups(k), out.data, ElemOf(out));
    FISSION_LAUNCHED();
  });
}

void LinearMx(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  WithCodes(w.dtype, "LinearMx", [](auto) {});
  CheckMx(w, w_scale, w.dtype, m, k, "LinearMx: the weight", 0);
  if (!MxGemvTakes(k))
    Fail("Linear: the CUDA backend's ", FormatName(w.dtype), " kernel takes k % 8 == 0 (rows start on a word of ",
         "codes); this weight has k = ", k);
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m, "LinearMx shapes x", x.shape.ToString(), " w",
                w.shape.ToString(), " out", out.shape.ToString());
  if (n == 0) return;
  const MxInput in = QuantizeMx(ctx, w.dtype, x.View(Shape{n, k}), nullptr, n);
  const std::int64_t gp = PaddedGroups(k), tiles = Ceil(n, kTokens);
  WithCodes(w.dtype, "LinearMx", [&](auto e) {
    using E = decltype(e);
    for (std::int64_t first = 0; first < tiles; first += kMaxGridY) {
      const std::int64_t count = std::min(kMaxGridY, tiles - first), t0 = first * kTokens;
      const dim3 grid(static_cast<unsigned>(Ceil(m, kRows)), static_cast<unsigned>(count));
      MxGemvKernel<E><<<grid, kWarps * 32, 0, ctx.stream()>>>(
          in.codes.ptr<typename E::Piece>() + t0 * gp * 4, in.scales.ptr<float>() + t0 * gp, n - t0,
          w.ptr<std::uint8_t>(), w_scale.ptr<std::uint8_t>(), m, k, gp,
          static_cast<char*>(out.data) + DTypeBytes(out.dtype, t0 * m), ElemOf(out));
      FISSION_LAUNCHED();
    }
  });
}

void MoeExpertsMx(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                  std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale, std::span<const Tensor> down,
                  std::span<const Tensor> down_scale, const Tensor& out, float limit) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  const int experts = static_cast<int>(gate_up.size());
  FISSION_CHECK(experts > 0 && down.size() == gate_up.size() && gate_up_scale.size() == gate_up.size() &&
                    down_scale.size() == down.size() && topk_weights.dtype == DType::kF32 &&
                    topk_ids.dtype == DType::kI32 && topk_ids.rank() == 2 && topk_ids.shape[0] == n &&
                    topk_weights.shape == topk_ids.shape && out.numel() == n * hidden,
                "MoeExpertsMx arguments");
  const DType codes = gate_up[0].dtype;
  WithCodes(codes, "MoeExpertsMx", [](auto) {});
  const std::int64_t inter = down[0].shape[1];
  for (std::size_t e = 0; e < gate_up.size(); ++e) {
    CheckMx(gate_up[e], gate_up_scale[e], codes, 2 * inter, hidden, "MoeExpertsMx: gate_up of expert", e);
    CheckMx(down[e], down_scale[e], codes, hidden, inter, "MoeExpertsMx: down of expert", e);
  }
  if (!MxGemvTakes(hidden) || !MxGemvTakes(inter))
    Fail("MoeExperts: the CUDA backend's ", FormatName(codes), " kernel takes k % 8 == 0 in both products (rows ",
         "start on a word of codes); these experts have hidden ", hidden, " and intermediate ", inter);
  if (n == 0) return;
  const MxTable gu_table = ExpertTable(ctx, gate_up, gate_up_scale, "MoeExpertsMx (gate_up)");
  const MxTable down_table = ExpertTable(ctx, down, down_scale, "MoeExpertsMx (down)");
  // Every size plans on the device (same kernels, no host wait); a call whose runs would not fit
  // one grid goes in slices of tokens (a prefill of tens of thousands of tokens).
  ForEachRunSlice(n, topk_ids.shape[1], experts, [&](std::int64_t t0, std::int64_t t1) {
    RoutedExperts(ctx, codes, x.Rows(t0, t1), topk_ids.Rows(t0, t1), topk_weights.Rows(t0, t1), gu_table,
                  down_table, inter, experts, out.View(Shape{n, hidden}).Rows(t0, t1), limit);
  });
}

}  // namespace fission::kernels::cuda
