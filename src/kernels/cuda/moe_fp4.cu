// DeepSeek-V4's FP4 weights on sm_90 (WeightFormat::Mxfp4A8): e2m1 codes, two a byte, with one
// e8m0 scale per 1x32 of a row, read as stored (4.25 bits a weight from HBM), times activations
// quantized to e4m3 per 1x128 with power-of-two scales, as DeepSeek-V4's reference quantizes the
// input of every FP4 (and FP8) product (act_quant, then fp4_gemm in mixed precision). Products on
// the tensor cores: mma.sync m16n8k32 e4m3 x e4m3, one MMA per weight group of 32, its fp32 sums
// scaled by the group's weight scale and then, per 128, by the token's activation scale. The CPU
// (tensor/quantize.h) quantizes the activations by the same rule, so the two differ by the order
// of the fp32 sums only.
//
// Decode: an e2m1 code s|e1 e0|m placed as the e4m3 byte s|0 0 e1 e0|m 0 0 is 2^-6 times its value
// exactly (code 0.5 lands on e4m3's subnormals), so the 2^6 goes into the final scale. Four codes
// in the low nibbles of a word's bytes take ((w << 2) & 0x1C1C1C1C) | ((w << 4) & 0x80808080), the
// four high nibbles ((w >> 2) & 0x1C1C1C1C) | (w & 0x80808080), and two prmt put the eight bytes in
// the word's code order: about nine integer operations per eight weights, no multiply (a bf16
// decode with the scale multiplied in took five per two). E2m1ToE4m3 (e2m1.cuh) is shared with the
// grouped GEMM that prefill-sized calls of the routed experts run (moe_grouped.cu).
//
// Tile: a warp per 16 weight rows and up to 8 tokens as the MMA's columns; lane (gid, t) holds rows
// gid and gid + 8 and token gid. MMA j of chunk c (128 values, one activation block) covers group
// 4c + j: lane t's k slots 4t..4t+3 and 16+4t..16+4t+3 are the group's codes 8t..8t+7, which is
// word t of the group's 16 bytes (one 4-byte load per row), and the token's e4m3 codes 8t..8t+7 of
// the group (one 8-byte load). A block is 4 warps; kSplit of them split k by chunks and add in warp
// order (StoreMmaTile), so a block covers 64 / kSplit rows: kSplit is 4 when k has 4 chunks or
// more, 2 or 1 for shorter rows (DeepSeek-V4-Flash's down projection at TP 8 has k = 256). Rows
// past m and tokens past the run read row 0 / token 0 (never stored).
//
// Rows must hold whole weight groups, k % 32 == 0, checked with an Error. DeepSeek-V4's shapes hold
// whole activation blocks too (its act_quant asserts k % 128 == 0); a shorter last block (the tiny
// test models) is quantized over its own values on both sides, and its missing groups read nothing.
#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/e2m1.cuh"
#include "kernels/cuda/mma_gemv.cuh"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kGroup = 32, kBlock = 128, kChunkGroups = kBlock / kGroup, kWarps = 4, kRows = 16, kTokens = 8;
static_assert(kGemvRunRows == kTokens);

__host__ __device__ constexpr std::int64_t Ceil(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// Weight rows a block covers: 4 warps, kSplit of them on each 16-row tile.
__host__ __device__ constexpr std::int64_t RowsPerBlock(int split) { return kRows * (kWarps / split); }

// The activations' rule (tensor/quantize.h, Ue8m0Exponent): 2^ceil(log2(max(amax, 1e-4) / 448)).
__device__ __forceinline__ int BlockExponent(float amax) {
  int e = 0;
  const float m = frexpf(fmaxf(amax, 1e-4f) / 448.0f, &e);
  return m == 0.5f ? e - 1 : e;
}

// One warp per (row, 128-value block) of activations, 4 values a lane: the block's power-of-two
// scale from the warp's amax and the lane's four e4m3 codes (NaN and infinities do not enter the
// amax, as on the CPU). Row r's values come from `value(r, i)`.
template <class Value>
__device__ __forceinline__ void QuantizeBlock(std::int64_t rows, std::int64_t k, std::uint8_t* codes, float* scales,
                                              const Value& value) {
  const std::int64_t blocks = Ceil(k, kBlock);
  const std::int64_t item = blockIdx.x * static_cast<std::int64_t>(blockDim.x / 32) + (threadIdx.x >> 5);
  if (item >= rows * blocks) return;
  const int lane = threadIdx.x & 31;
  const std::int64_t r = item / blocks, b = item - r * blocks, c0 = b * kBlock + 4 * lane;
  // A shorter last block (k % 128 != 0; k % 32 == 0, so a lane has all four values or none): the
  // lanes past k add zeros to the amax and store nothing.
  const bool in = c0 < k;
  float v[4] = {0.0f, 0.0f, 0.0f, 0.0f}, amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (in) v[i] = value(r, c0 + i);
    if (isfinite(v[i])) amax = fmaxf(amax, fabsf(v[i]));
  }
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const int e = BlockExponent(amax);
  std::uint32_t packed = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i)
    packed |= static_cast<std::uint32_t>(__nv_cvt_float_to_fp8(ldexpf(v[i], -e), __NV_SATFINITE, __NV_E4M3))
              << (8 * i);
  if (in) *reinterpret_cast<std::uint32_t*>(codes + r * k + c0) = packed;
  if (lane == 0) scales[r * blocks + b] = ldexpf(1.0f, e);
}

// Rows of x [*, k] (fp32 or bf16), row r of the output from row rows_of[r] (or r when null): the
// routed experts' gather and the Linear's input in one pass.
__global__ void QuantizeRowsKernel(const void* x, Elem xe, const std::int32_t* rows_of, std::int64_t rows,
                                   std::int64_t k, std::uint8_t* codes, float* scales) {
  QuantizeBlock(rows, k, codes, scales, [&](std::int64_t r, std::int64_t i) {
    return LoadF(x, (rows_of != nullptr ? rows_of[r] : r) * k + i, xe);
  });
}

// silu(gate) · up of the fp32 gate_up rows [rows, 2 · inter] (with limit > 0, DeepSeek-V4, the gate
// clamped from above and up to [-limit, limit] first, as SiluMul), quantized for the down product.
__global__ void QuantizeSiluMulKernel(const float* gu, std::int64_t rows, std::int64_t inter, float limit,
                                      std::uint8_t* codes, float* scales) {
  QuantizeBlock(rows, inter, codes, scales, [&](std::int64_t r, std::int64_t i) {
    return SiluMulOf(gu[r * 2 * inter + i], gu[r * 2 * inter + inter + i], limit);
  });
}

Fp4Input QuantizedBuffers(CudaContext& ctx, std::int64_t rows, std::int64_t k) {
  return {Buffer(DType::kF8E4M3, Shape{rows, k}, ctx.allocator()),
          Buffer(DType::kF32, Shape{rows, Ceil(k, kBlock)}, ctx.allocator())};
}
unsigned QuantizeBlocks(std::int64_t rows, std::int64_t k) {
  return static_cast<unsigned>(Ceil(rows * Ceil(k, kBlock), 8));  // 8 warps a block
}

// Whether four scale codes hold 0 (2^-127) or 0xFF (NaN), which ScaleOf (e2m1.cuh) does not decode:
// the warp then takes ScaleOfExact for the chunk.
__device__ __forceinline__ bool HasEdgeCode(std::uint32_t four) {
  // a byte 0x00 or 0xFF among the four
  const std::uint32_t zero = (four - 0x01010101u) & ~four & 0x80808080u;
  const std::uint32_t ones = (~four - 0x01010101u) & four & 0x80808080u;
  return (zero | ones) != 0u;
}

// One chunk (4 groups, one activation block) of rows a and b: the words t of the four groups'
// codes, their scale codes (byte j: group 4c + j), the token's codes (8 a group) into the chunk's
// sums, weight-scaled.
template <bool kExact>
__device__ __forceinline__ void Chunk(const std::uint32_t (&wa)[4], const std::uint32_t (&wb)[4], std::uint32_t sa,
                                      std::uint32_t sb, const uint2 (&xv)[4], float (&sum)[4]) {
#pragma unroll
  for (int j = 0; j < kChunkGroups; ++j) {
    std::uint32_t a0, a2, a1, a3;
    E2m1ToE4m3(wa[j], a0, a2);
    E2m1ToE4m3(wb[j], a1, a3);
    float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    MmaE4m3(d, a0, a1, a2, a3, xv[j].x, xv[j].y);
    const float fa = kExact ? ScaleOfExact(sa, j) : ScaleOf(sa, j);
    const float fb = kExact ? ScaleOfExact(sb, j) : ScaleOf(sb, j);
    sum[0] = fmaf(d[0], fa, sum[0]);
    sum[1] = fmaf(d[1], fa, sum[1]);
    sum[2] = fmaf(d[2], fb, sum[2]);
    sum[3] = fmaf(d[3], fb, sum[3]);
  }
}

// The block's 64 / kSplit weight rows from row0 of w (codes [m, k], scales [m, k / 32]) for up to
// 8 rows of quantized activations (codes xq [n, k], scales xs [n, k / 128]), stored into out rows
// out_row0 + token.
template <int kSplit, bool kWhole>
__device__ __forceinline__ void Fp4MmaTile(const std::uint8_t* xq, const float* xs, std::int64_t n,
                                           const std::uint8_t* w, const std::uint8_t* ws, std::int64_t m,
                                           std::int64_t k, std::int64_t row0, void* out, std::int64_t out_row0,
                                           Elem oe) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  const int chunks = static_cast<int>(Ceil(k, kBlock)), groups = static_cast<int>(k / kGroup);
  const std::int64_t ra = row0 + kRows * (warp / kSplit) + gid, rb = ra + 8;
  const std::int64_t rai = ra < m ? ra : 0, rbi = rb < m ? rb : 0;
  // Word t of group g of a row: at row * k / 8 + 4 g + t (words). With whole blocks the 4 scale
  // codes of chunk c are word c of the row's scales (k / 32 bytes a row, a multiple of 4);
  // otherwise they are read a byte at a time and the groups past k read nothing (zero codes).
  const auto* wa = reinterpret_cast<const std::uint32_t*>(w + rai * (k / 2)) + t;
  const auto* wb = reinterpret_cast<const std::uint32_t*>(w + rbi * (k / 2)) + t;
  const std::uint8_t* sa = ws + rai * groups;
  const std::uint8_t* sb = ws + rbi * groups;
  const auto scale_codes = [&](const std::uint8_t* s, int c) {
    if constexpr (kWhole) return __ldg(reinterpret_cast<const std::uint32_t*>(s) + c);
    std::uint32_t four = 0;
#pragma unroll
    for (int j = 0; j < kChunkGroups; ++j)
      four |= (kChunkGroups * c + j < groups ? std::uint32_t{__ldg(s + kChunkGroups * c + j)} : 127u) << (8 * j);
    return four;
  };
  const auto* xrow = reinterpret_cast<const uint2*>(xq + (gid < n ? gid : 0) * k) + t;
  const std::int64_t t0 = 2 * t < n ? 2 * t : 0, t1 = 2 * t + 1 < n ? 2 * t + 1 : 0;
  const float* xs0 = xs + t0 * chunks;
  const float* xs1 = xs + t1 * chunks;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 1
  for (int c = warp % kSplit; c < chunks; c += kSplit) {
    std::uint32_t ca[4], cb[4];
    uint2 xv[4];
#pragma unroll
    for (int j = 0; j < kChunkGroups; ++j) {
      const int g = kChunkGroups * c + j;
      const bool ok = kWhole || g < groups;
      ca[j] = ok ? __ldg(wa + 4 * g) : 0u;
      cb[j] = ok ? __ldg(wb + 4 * g) : 0u;
      xv[j] = ok ? __ldg(xrow + 4 * g) : make_uint2(0u, 0u);
    }
    const std::uint32_t s_a = scale_codes(sa, c), s_b = scale_codes(sb, c);
    float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (__any_sync(0xffffffffu, HasEdgeCode(s_a) || HasEdgeCode(s_b)))
      Chunk<true>(ca, cb, s_a, s_b, xv, sum);
    else
      Chunk<false>(ca, cb, s_a, s_b, xv, sum);
    const float x0 = __ldg(xs0 + c), x1 = __ldg(xs1 + c);
    acc[0] = fmaf(sum[0], x0, acc[0]);
    acc[1] = fmaf(sum[1], x1, acc[1]);
    acc[2] = fmaf(sum[2], x0, acc[2]);
    acc[3] = fmaf(sum[3], x1, acc[3]);
  }
#pragma unroll
  for (float& a : acc) a *= 64.0f;  // the decode's 2^-6
  StoreMmaTile<kWarps, kSplit>(acc, n, m, row0, out, out_row0, oe);
}

// The routed experts: blockIdx.y is a run of at most 8 rows of one expert (listed on the device,
// moe.cu), blocks past the listed count return at once, weights from the experts' pointer tables.
template <int kSplit, bool kWhole>
__global__ void __launch_bounds__(kWarps * 32, 8)
    Fp4GemvRunsKernel(const std::uint8_t* xq, const float* xs, const ExpertRun* runs, const std::int32_t* run_count,
                      const std::uint8_t* const* w, const std::uint8_t* const* w_scale, std::int64_t m,
                      std::int64_t k, void* out, Elem oe) {
  if (static_cast<std::int32_t>(blockIdx.y) >= *run_count) return;
  const ExpertRun run = runs[blockIdx.y];
  Fp4MmaTile<kSplit, kWhole>(xq + run.row0 * k, xs + run.row0 * Ceil(k, kBlock), run.rows, w[run.expert],
                     w_scale[run.expert], m, k, blockIdx.x * RowsPerBlock(kSplit), out, run.row0, oe);
}

// One weight (Linear): blockIdx.y is a tile of 8 tokens.
template <int kSplit, bool kWhole>
__global__ void __launch_bounds__(kWarps * 32, 8)
    Fp4GemvKernel(const std::uint8_t* xq, const float* xs, std::int64_t n, const std::uint8_t* w,
                  const std::uint8_t* w_scale, std::int64_t m, std::int64_t k, void* out, Elem oe) {
  const std::int64_t t0 = blockIdx.y * static_cast<std::int64_t>(kTokens);
  Fp4MmaTile<kSplit, kWhole>(xq + t0 * k, xs + t0 * Ceil(k, kBlock), n - t0 < kTokens ? n - t0 : kTokens, w, w_scale, m, k,
                     blockIdx.x * RowsPerBlock(kSplit), out, t0, oe);
}

// The warps splitting k: 4 when the rows have 4 chunks of 128 values or more, else 2 or 1.
int SplitFor(std::int64_t k) {
  const std::int64_t chunks = Ceil(k, kBlock);
  return chunks >= 4 ? 4 : chunks >= 2 ? 2 : 1;
}

// f(std::integral_constant<int, kSplit>, std::bool_constant<whole 128-value blocks>): the one place
// k picks the kernels.
template <class F>
void WithKernel(std::int64_t k, F&& f) {
  const int split = SplitFor(k);
  auto with_split = [&](auto whole) {
    if (split == 4) return f(std::integral_constant<int, 4>{}, whole);
    if (split == 2) return f(std::integral_constant<int, 2>{}, whole);
    return f(std::integral_constant<int, 1>{}, whole);
  };
  if (k % kBlock == 0) return with_split(std::true_type{});
  return with_split(std::false_type{});
}

void CheckFp4(const Tensor& w, const Tensor& s, std::int64_t m, std::int64_t k, const char* what, std::size_t e) {
  FISSION_CHECK(w.dtype == DType::kF4E2M1 && w.rank() == 2 && w.shape[0] == m && w.shape[1] == k &&
                    s.dtype == DType::kE8M0 && s.rank() == 2 && s.shape[0] == m && s.shape[1] == Ceil(k, kGroup) &&
                    Aligned16(w.data) && Aligned16(s.data),
                what, " ", e, " is ", DTypeName(w.dtype), w.shape.ToString(), " with scales ", DTypeName(s.dtype),
                s.shape.ToString(), "; expected e2m1 codes [", m, ", ", k, "] with e8m0 scales [", m, ", ",
                Ceil(k, kGroup), "], 16-byte aligned");
}

// The experts' code and scale pointers on the device, one table per weight set, kept by the context
// (built by an eager call; a capture finds it there).
struct Fp4Table {
  const void* const* codes;
  const void* const* scales;
};
Fp4Table ExpertTable(CudaContext& ctx, std::span<const Tensor> w, std::span<const Tensor> w_scale, const char* what) {
  const void* const* table = ctx.PointerTable(w, w_scale, what);
  return {table, table + w.size()};
}

// One call's experts, every step on the device: the permutation and its runs, the tokens' rows
// gathered and quantized in one pass, the gate_up product into fp32, silu·up (clamped at `limit`)
// quantized for the down product, and the combine in fp32. The products run on the 8-row GEMV, or
// (`grouped`, prefill) on the grouped GEMM over runs of 128 rows (moe_grouped.cu).
void RoutedExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   const Fp4Table& gu_table, const Fp4Table& down_table, std::int64_t inter, int experts,
                   const Tensor& out, float limit, bool grouped) {
  const std::int64_t hidden = x.shape[1];
  std::optional<OpTimer> timer(std::in_place, ctx, ".moe_fp4 device plan", x.shape[0]);
  const ExpertRows rows = PermuteByExpertOnDevice(ctx, topk_ids, experts, grouped ? kGroupedTileRows : kGemvRunRows);
  timer.emplace(ctx, grouped ? ".moe_fp4 grouped GEMM" : ".moe_fp4 GEMV runs", rows.max_runs);
  const auto* runs = rows.runs.ptr<ExpertRun>();
  const auto* run_count = rows.run_count.ptr<std::int32_t>();
  const Fp4Input xq = QuantizedBuffers(ctx, rows.pairs, hidden), aq = QuantizedBuffers(ctx, rows.pairs, inter);
  Buffer gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  QuantizeRowsKernel<<<QuantizeBlocks(rows.pairs, hidden), 256, 0, ctx.stream()>>>(
      x.data, ElemOf(x), rows.token_of_row.ptr<std::int32_t>(), rows.pairs, hidden, xq.codes.ptr<std::uint8_t>(),
      xq.scales.ptr<float>());
  FISSION_LAUNCHED();
  const auto product = [&](const Fp4Input& in, const Fp4Table& table, std::int64_t m, const Tensor& result) {
    if (grouped)
      GroupedGemmFp4(ctx, in, runs, run_count, rows.max_runs, table.codes, table.scales, m, result);
    else
      Fp4GemvRuns(ctx, in, runs, run_count, rows.max_runs, table.codes, table.scales, m, result);
  };
  product(xq, gu_table, 2 * inter, gu);
  QuantizeSiluMulKernel<<<QuantizeBlocks(rows.pairs, inter), 256, 0, ctx.stream()>>>(
      gu.ptr<float>(), rows.pairs, inter, limit, aq.codes.ptr<std::uint8_t>(), aq.scales.ptr<float>());
  FISSION_LAUNCHED();
  product(aq, down_table, hidden, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace

bool Fp4GemvTakes(std::int64_t k) { return k > 0 && k % kGroup == 0; }

Fp4Input QuantizeFp4Input(CudaContext& ctx, const Tensor& x) {
  const std::int64_t k = x.shape[-1], n = x.numel() / k;
  FISSION_CHECK(Fp4GemvTakes(k) && (x.dtype == DType::kF32 || x.dtype == DType::kBF16),
                "QuantizeFp4Input: x ", x.shape.ToString(), " ", DTypeName(x.dtype), " (fp32 or bf16, k % 32 == 0)");
  Fp4Input q = QuantizedBuffers(ctx, n, k);
  if (n == 0) return q;
  QuantizeRowsKernel<<<QuantizeBlocks(n, k), 256, 0, ctx.stream()>>>(x.data, ElemOf(x), nullptr, n, k,
                                                                       q.codes.ptr<std::uint8_t>(),
                                                                       q.scales.ptr<float>());
  FISSION_LAUNCHED();
  return q;
}

void Fp4GemvRuns(CudaContext& ctx, const Fp4Input& x, const ExpertRun* runs, const std::int32_t* run_count,
                 std::int64_t max_runs, const void* const* expert_codes, const void* const* expert_scales,
                 std::int64_t m, const Tensor& out) {
  const Tensor codes = x.codes.tensor();
  const std::int64_t k = codes.shape[-1], pairs = codes.numel() / k;
  FISSION_CHECK(Fp4GemvTakes(k) && codes.dtype == DType::kF8E4M3 && x.scales.tensor().numel() == pairs * Ceil(k, kBlock) &&
                    out.shape[-1] == m && out.numel() / m == pairs && max_runs <= kMaxGridY,
                "Fp4GemvRuns: x ", codes.shape.ToString(), " ", DTypeName(codes.dtype), ", m ", m, ", out ",
                out.shape.ToString(), ", ", max_runs, " runs");
  if (max_runs == 0) return;
  const auto* w = reinterpret_cast<const std::uint8_t* const*>(expert_codes);
  const auto* ws = reinterpret_cast<const std::uint8_t* const*>(expert_scales);
  WithKernel(k, [&](auto split, auto whole) {
    constexpr int kSplit = decltype(split)::value;
    const dim3 grid(static_cast<unsigned>(Ceil(m, RowsPerBlock(kSplit))), static_cast<unsigned>(max_runs));
    Fp4GemvRunsKernel<kSplit, decltype(whole)::value><<<grid, kWarps * 32, 0, ctx.stream()>>>(x.codes.ptr<std::uint8_t>(),
                                                                     x.scales.ptr<float>(), runs, run_count, w, ws,
                                                                     m, k, out.data, ElemOf(out));
    FISSION_LAUNCHED();
  });
}

void LinearFp4(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  CheckFp4(w, w_scale, m, k, "LinearFp4: the weight", 0);
  if (!Fp4GemvTakes(k))
    Fail("Linear: the CUDA backend's FP4 (W4A8) kernel takes k % 32 == 0 (a lane reads whole 1x32 groups); ",
         "this weight has k = ", k);
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m && (x.dtype == DType::kF32 || x.dtype == DType::kBF16),
                "LinearFp4 shapes x", x.shape.ToString(), " ", DTypeName(x.dtype), " w", w.shape.ToString(), " out",
                out.shape.ToString());
  if (n == 0) return;
  const Fp4Input q = QuantizeFp4Input(ctx, x);
  const std::int64_t tiles = Ceil(n, kTokens);
  WithKernel(k, [&](auto split, auto whole) {
    constexpr int kSplit = decltype(split)::value;
    for (std::int64_t first = 0; first < tiles; first += kMaxGridY) {
      const std::int64_t count = std::min(kMaxGridY, tiles - first), t0 = first * kTokens;
      const dim3 grid(static_cast<unsigned>(Ceil(m, RowsPerBlock(kSplit))), static_cast<unsigned>(count));
      Fp4GemvKernel<kSplit, decltype(whole)::value><<<grid, kWarps * 32, 0, ctx.stream()>>>(
          q.codes.ptr<std::uint8_t>() + t0 * k, q.scales.ptr<float>() + t0 * Ceil(k, kBlock), n - t0,
          w.ptr<std::uint8_t>(), w_scale.ptr<std::uint8_t>(), m, k,
          static_cast<char*>(out.data) + DTypeBytes(out.dtype, t0 * m), ElemOf(out));
      FISSION_LAUNCHED();
    }
  });
}

void MoeExpertsFp4(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                   std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out, float limit,
                   ExpertsPrefill prefill) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  const int experts = static_cast<int>(gate_up.size());
  FISSION_CHECK(experts > 0 && down.size() == gate_up.size() && gate_up_scale.size() == gate_up.size() &&
                    down_scale.size() == down.size() && topk_weights.dtype == DType::kF32 &&
                    topk_ids.dtype == DType::kI32 && topk_ids.rank() == 2 && topk_ids.shape[0] == n &&
                    topk_weights.shape == topk_ids.shape && out.numel() == n * hidden &&
                    (x.dtype == DType::kF32 || x.dtype == DType::kBF16),
                "MoeExpertsFp4 arguments");
  const std::int64_t inter = down[0].shape[1];
  for (std::size_t e = 0; e < gate_up.size(); ++e) {
    CheckFp4(gate_up[e], gate_up_scale[e], 2 * inter, hidden, "MoeExpertsFp4: gate_up of expert", e);
    CheckFp4(down[e], down_scale[e], hidden, inter, "MoeExpertsFp4: down of expert", e);
  }
  if (!Fp4GemvTakes(hidden) || !Fp4GemvTakes(inter))
    Fail("MoeExperts: the CUDA backend's FP4 (W4A8) kernel takes k % 32 == 0 in both products (a lane reads ",
         "whole 1x32 groups); these experts have hidden ", hidden, " and intermediate ", inter);
  if (n == 0) return;
  const Fp4Table gu_table = ExpertTable(ctx, gate_up, gate_up_scale, "MoeExpertsFp4 (gate_up)");
  const Fp4Table down_table = ExpertTable(ctx, down, down_scale, "MoeExpertsFp4 (down)");
  // Every size plans on the device (no host wait). Prefill-sized calls run the grouped GEMM, a rule
  // on shapes only, so an eager call and its replay take the same kernels. A call whose runs would
  // not fit one grid goes in slices of tokens (a prefill of tens of thousands of tokens).
  const bool grouped = prefill == ExpertsPrefill::kGrouped && n > kDeviceRoutedTokens &&
                       GroupedGemmFp4Takes(hidden) && GroupedGemmFp4Takes(inter);
  ForEachRunSlice(
      n, topk_ids.shape[1], experts,
      [&](std::int64_t t0, std::int64_t t1) {
        RoutedExperts(ctx, x.Rows(t0, t1), topk_ids.Rows(t0, t1), topk_weights.Rows(t0, t1), gu_table, down_table,
                      inter, experts, out.View(Shape{n, hidden}).Rows(t0, t1), limit, grouped);
      },
      grouped ? kGroupedTileRows : kGemvRunRows);
}

}  // namespace fission::kernels::cuda
