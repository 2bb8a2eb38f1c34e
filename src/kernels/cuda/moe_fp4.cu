// DeepSeek-V4's FP4 weights on sm_90 (WeightFormat::Mxfp4A16): e2m1 codes, two a byte, with one
// e8m0 scale per 1x32 of a row, read as stored (4.25 bits a weight from HBM), decoded into bf16 in
// registers and multiplied with bf16 activations on the tensor cores (mma.sync m16n8k16, fp32
// accumulation): W4A16. The activations are not quantized (V4's reference multiplies its decoded
// experts with unquantized activations); fp32 inputs are rounded to bf16 for the MMA, so a product
// differs from the CPU's (tensor/quantize.h: the decoded weight times fp32 activations) by that
// rounding and the order of the fp32 sums only.
//
// Decode (the bit layout Marlin uses for FP4 into bf16): with an e2m1 code s|e1 e0|m in the top
// nibble of a 16-bit half, (y & 0x8000) | ((y & 0x7000) >> 6) puts the sign in bf16's sign bit, e1 e0
// in the exponent's two low bits and m in the mantissa's top bit: the bf16 whose value is 2^-126
// times the e2m1 value, subnormal for the codes 0 and 0.5, exactly. One prmt first brings the
// codes of a byte (values 2i, 2i + 1) into the top nibbles of the two halves, so the pairs come
// out in the activations' order. One bf16 multiply by 2^(min(s, 128) - 1) then applies the decode's
// 2^126 and the group's scale 2^(s - 127) together; scales above 2^1 (codes 129..254: weights
// above 12, never seen in a checkpoint) take a second multiply by 2^(s - 128), decided by a warp
// vote per group. Every intermediate is an e2m1 value times a power of two bf16 holds, so the
// decoded weight is exact (code 0 of the scale is 2^-127 and 0xFF NaN, as the CPU decodes them).
// About 4.25 integer operations (prmt, two masks and a shift, shared shifts) and one bf16 multiply
// per two weights.
//
// Tile (as gemv_bf16.cu and moe_mx.cu): a warp per 16 weight rows and up to 8 tokens as the MMA's
// columns. Lane (gid, t) reads rows gid and gid + 8 and its token gid over whole 1x32 groups: one
// 16-byte load of codes per row (group 4c + t of chunk c), one scale byte per row, and the token's
// 32 values (four 16-byte loads of bf16, or eight of fp32 converted in registers). The dot
// product's k order is free, so MMA 2q + h takes values [8q + 4h, 8q + 4h + 4) of every lane's
// group: a0/a2 (row gid) and b0/b1 (the token) hold the same elements, a1/a3 row gid + 8's. A
// block is 4 warps; kSplit of them split k by chunks of 4 groups (128 values) and add in warp
// order (StoreMmaTile), so a block covers 64 / kSplit rows: kSplit is 4 when k has 4 chunks or
// more, 2 or 1 for shorter rows (DeepSeek-V4-Flash's down projection at TP 8 has k = 256), so
// warps are not left without a chunk. Rows past m and tokens past the run read row 0 / token 0
// (never stored); a group past k (k not a multiple of 128) reads nothing.
//
// Rows of codes must start on a 16-byte boundary: k % 32 == 0 and 16-byte aligned codes, checked
// with an Error (DeepSeek-V4's experts qualify at every TP size the loader keeps them for).
#include <algorithm>
#include <optional>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/mma_gemv.cuh"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kGroup = 32, kChunkGroups = 4, kWarps = 4, kRows = 16, kTokens = 8;
static_assert(kGemvRunRows == kTokens);

__host__ __device__ constexpr std::int64_t Ceil(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// Weight rows a block covers: 4 warps, kSplit of them on each 16-row tile.
__host__ __device__ constexpr std::int64_t RowsPerBlock(int split) { return kRows * (kWarps / split); }

__device__ __forceinline__ std::uint32_t MulBf16x2(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}

// The codes in the top nibbles of y's halves as bf16 bits: 2^-126 times their e2m1 values.
__device__ __forceinline__ std::uint32_t E2m1Bits(std::uint32_t y) {
  return (y & 0x80008000u) | ((y & 0x70007000u) >> 6);
}

// A word of 8 codes (value 2i in the low nibble of byte i) as 4 bf16 pairs in order, value 2i in
// the low half of out[i], each 2^-126 times its e2m1 value. Byte i of w << 4 has code 2i in its top
// nibble, byte i of w code 2i + 1: prmt takes the first into byte 1 and the second into byte 3.
__device__ __forceinline__ void E2m1Pairs(std::uint32_t w, std::uint32_t (&out)[4]) {
  const std::uint32_t w4 = w << 4;
  out[0] = E2m1Bits(Prmt(w4, w, 0x4400u));
  out[1] = E2m1Bits(Prmt(w4, w, 0x5511u));
  out[2] = E2m1Bits(Prmt(w4, w, 0x6622u));
  out[3] = E2m1Bits(Prmt(w4, w, 0x7733u));
}

__device__ __forceinline__ std::uint32_t Splat(std::uint32_t bf16) { return bf16 | bf16 << 16; }
// An e8m0 scale code s as the factors of the decoded bits: 2^(min(s, 128) - 1) (NaN for 0xFF), and
// 2^(s - 128) for 128 < s < 255, whose product is 2^126 · 2^(s - 127).
__device__ __forceinline__ bool NeedsSecondFactor(std::uint32_t s) { return s > 128u && s != 0xFFu; }
__device__ __forceinline__ std::uint32_t FirstFactor(std::uint32_t s) {
  return Splat(s == 0xFFu ? 0x7FC0u : (min(s, 128u) + 126u) << 7);
}
__device__ __forceinline__ std::uint32_t SecondFactor(std::uint32_t s) {
  return Splat(NeedsSecondFactor(s) ? (s - 1u) << 7 : 0x3F80u);
}

// One 1x32 group of rows a and b (16 bytes of codes each, their scale codes) times the token's 32
// values as bf16 pairs (xv[q] holds values [8q, 8q + 8)), into the accumulator: 8 MMAs. Every lane
// of the warp reaches the vote.
__device__ __forceinline__ void Group(const uint4& ca, const uint4& cb, std::uint32_t sa, std::uint32_t sb,
                                      const uint4 (&xv)[4], float (&acc)[4]) {
  const std::uint32_t fa = FirstFactor(sa), fb = FirstFactor(sb);
  const bool second = __any_sync(0xffffffffu, NeedsSecondFactor(sa) || NeedsSecondFactor(sb));
  const std::uint32_t ga = SecondFactor(sa), gb = SecondFactor(sb);
  const std::uint32_t wa[4] = {ca.x, ca.y, ca.z, ca.w}, wb[4] = {cb.x, cb.y, cb.z, cb.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    std::uint32_t a[4], b[4];
    E2m1Pairs(wa[q], a);
    E2m1Pairs(wb[q], b);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      a[i] = MulBf16x2(a[i], fa);
      b[i] = MulBf16x2(b[i], fb);
    }
    if (second) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = MulBf16x2(a[i], ga);
        b[i] = MulBf16x2(b[i], gb);
      }
    }
    MmaBf16(acc, a[0], b[0], a[1], b[1], xv[q].x, xv[q].y);
    MmaBf16(acc, a[2], b[2], a[3], b[3], xv[q].z, xv[q].w);
  }
}

// The block's 64 / kSplit weight rows from row0 of w (codes [m, k], scales [m, k / 32]) for up to
// 8 rows of activations x [n, k] (fp32 or bf16), stored into out rows out_row0 + token.
template <bool kF32, int kSplit>
__device__ __forceinline__ void Fp4MmaTile(const void* x, std::int64_t n, const std::uint8_t* w,
                                           const std::uint8_t* ws, std::int64_t m, std::int64_t k,
                                           std::int64_t row0, void* out, std::int64_t out_row0, Elem oe) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gid = lane >> 2, t = lane & 3;
  const std::int64_t groups = k / kGroup, chunks = Ceil(groups, kChunkGroups);
  const std::int64_t ra = row0 + kRows * (warp / kSplit) + gid, rb = ra + 8;
  const std::int64_t rai = ra < m ? ra : 0, rbi = rb < m ? rb : 0;
  const std::int64_t xrow = (gid < n ? gid : 0) * k;
  // Group g of a row: 16 bytes of codes at row * k / 2 + 16 g, its scale at row * groups + g.
  const auto* wa = reinterpret_cast<const uint4*>(w + rai * (k / 2));
  const auto* wb = reinterpret_cast<const uint4*>(w + rbi * (k / 2));
  const std::uint8_t* sa = ws + rai * groups;
  const std::uint8_t* sb = ws + rbi * groups;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 1
  for (std::int64_t c = warp % kSplit; c < chunks; c += kSplit) {
    const std::int64_t g = kChunkGroups * c + t;
    const bool ok = g < groups;
    const uint4 ca = ok ? __ldg(wa + g) : make_uint4(0u, 0u, 0u, 0u);
    const uint4 cb = ok ? __ldg(wb + g) : make_uint4(0u, 0u, 0u, 0u);
    const std::uint32_t s_a = ok ? __ldg(sa + g) : 127u, s_b = ok ? __ldg(sb + g) : 127u;
    uint4 xv[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) xv[q] = LoadBf16x8<kF32>(x, xrow + kGroup * g + 8 * q, ok);
    Group(ca, cb, s_a, s_b, xv, acc);
  }
  StoreMmaTile<kWarps, kSplit>(acc, n, m, row0, out, out_row0, oe);
}

// The routed experts: blockIdx.y is a run of at most 8 rows of one expert (listed on the device,
// moe.cu), blocks past the listed count return at once, weights from the experts' pointer tables.
template <bool kF32, int kSplit>
__global__ void __launch_bounds__(kWarps * 32, 8) Fp4GemvRunsKernel(const void* x, const ExpertRun* runs,
                                                               const std::int32_t* run_count,
                                                               const std::uint8_t* const* w,
                                                               const std::uint8_t* const* w_scale, std::int64_t m,
                                                               std::int64_t k, void* out, Elem oe) {
  if (static_cast<std::int32_t>(blockIdx.y) >= *run_count) return;
  const ExpertRun run = runs[blockIdx.y];
  constexpr std::size_t kElem = kF32 ? sizeof(float) : sizeof(__nv_bfloat16);
  const void* xr = static_cast<const char*>(x) + static_cast<std::size_t>(run.row0) * k * kElem;
  Fp4MmaTile<kF32, kSplit>(xr, run.rows, w[run.expert], w_scale[run.expert], m, k,
                           blockIdx.x * RowsPerBlock(kSplit), out, run.row0, oe);
}

// One weight (Linear): blockIdx.y is a tile of 8 tokens of x [n, k].
template <bool kF32, int kSplit>
__global__ void __launch_bounds__(kWarps * 32, 8) Fp4GemvKernel(const void* x, std::int64_t n, const std::uint8_t* w,
                                                           const std::uint8_t* w_scale, std::int64_t m,
                                                           std::int64_t k, void* out, Elem oe) {
  const std::int64_t t0 = blockIdx.y * static_cast<std::int64_t>(kTokens);
  constexpr std::size_t kElem = kF32 ? sizeof(float) : sizeof(__nv_bfloat16);
  Fp4MmaTile<kF32, kSplit>(static_cast<const char*>(x) + static_cast<std::size_t>(t0) * k * kElem,
                           n - t0 < kTokens ? n - t0 : kTokens, w, w_scale, m, k, blockIdx.x * RowsPerBlock(kSplit),
                           out, t0, oe);
}

// The warps splitting k: 4 when the rows have 4 chunks of 128 values or more, else 2 or 1.
int SplitFor(std::int64_t k) {
  const std::int64_t chunks = Ceil(k / kGroup, kChunkGroups);
  return chunks >= 4 ? 4 : chunks >= 2 ? 2 : 1;
}

// f(std::bool_constant<fp32 activations>, std::integral_constant<int, kSplit>): the one place the
// activations' dtype and k pick the kernels.
template <class F>
void WithKernel(DType xtype, std::int64_t k, F&& f) {
  const int split = SplitFor(k);
  auto with_split = [&](auto f32) {
    if (split == 4) return f(f32, std::integral_constant<int, 4>{});
    if (split == 2) return f(f32, std::integral_constant<int, 2>{});
    return f(f32, std::integral_constant<int, 1>{});
  };
  if (xtype == DType::kF32) return with_split(std::true_type{});
  FISSION_CHECK(xtype == DType::kBF16, "the FP4 GEMV takes fp32 or bf16 activations, got ", DTypeName(xtype));
  return with_split(std::false_type{});
}

void CheckFp4(const Tensor& w, const Tensor& s, std::int64_t m, std::int64_t k, const char* what, std::size_t e) {
  FISSION_CHECK(w.dtype == DType::kF4E2M1 && w.rank() == 2 && w.shape[0] == m && w.shape[1] == k &&
                    s.dtype == DType::kE8M0 && s.rank() == 2 && s.shape[0] == m && s.shape[1] == Ceil(k, kGroup) &&
                    Aligned16(w.data),
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
// gathered into bf16 (the MMA's input), both products into fp32, silu·up (clamped at `limit`)
// rounded to bf16 for the second product, and the combine in fp32.
void RoutedExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   const Fp4Table& gu_table, const Fp4Table& down_table, std::int64_t inter, int experts,
                   const Tensor& out, float limit) {
  const std::int64_t hidden = x.shape[1];
  std::optional<OpTimer> timer(std::in_place, ctx, ".moe_fp4 device plan", x.shape[0]);
  const ExpertRows rows = PermuteByExpertOnDevice(ctx, topk_ids, experts);
  timer.emplace(ctx, ".moe_fp4 GEMV runs", rows.max_runs);
  const auto* runs = rows.runs.ptr<ExpertRun>();
  const auto* run_count = rows.run_count.ptr<std::int32_t>();
  Buffer xp(DType::kBF16, Shape{rows.pairs, hidden}, ctx.allocator()),
      gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kBF16, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GatherRowsDevice(ctx, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs, xp);
  Fp4GemvRuns(ctx, xp, runs, run_count, rows.max_runs, gu_table.codes, gu_table.scales, 2 * inter, gu);
  SiluMul(ctx, gu, act, limit);
  Fp4GemvRuns(ctx, act, runs, run_count, rows.max_runs, down_table.codes, down_table.scales, hidden, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace

bool Fp4GemvTakes(std::int64_t k) { return k > 0 && k % kGroup == 0; }

void Fp4GemvRuns(CudaContext& ctx, const Tensor& x, const ExpertRun* runs, const std::int32_t* run_count,
                 std::int64_t max_runs, const void* const* expert_codes, const void* const* expert_scales,
                 std::int64_t m, const Tensor& out) {
  const std::int64_t k = x.shape[-1];
  FISSION_CHECK(Fp4GemvTakes(k) && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) && Aligned16(x.data) &&
                    out.shape[-1] == m && out.numel() / m == x.numel() / k && max_runs <= kMaxGridY,
                "Fp4GemvRuns: x ", x.shape.ToString(), " ", DTypeName(x.dtype), ", m ", m, ", out ",
                out.shape.ToString(), ", ", max_runs, " runs");
  if (max_runs == 0) return;
  const auto* w = reinterpret_cast<const std::uint8_t* const*>(expert_codes);
  const auto* ws = reinterpret_cast<const std::uint8_t* const*>(expert_scales);
  WithKernel(x.dtype, k, [&](auto f32, auto split) {
    constexpr bool kF32 = decltype(f32)::value;
    constexpr int kSplit = decltype(split)::value;
    const dim3 grid(static_cast<unsigned>(Ceil(m, RowsPerBlock(kSplit))), static_cast<unsigned>(max_runs));
    Fp4GemvRunsKernel<kF32, kSplit><<<grid, kWarps * 32, 0, ctx.stream()>>>(x.data, runs, run_count, w, ws, m, k,
                                                                          out.data, ElemOf(out));
    FISSION_LAUNCHED();
  });
}

void LinearFp4(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out) {
  const std::int64_t m = w.shape[0], k = w.shape[1], n = x.numel() / k;
  CheckFp4(w, w_scale, m, k, "LinearFp4: the weight", 0);
  if (!Fp4GemvTakes(k))
    Fail("Linear: the CUDA backend's FP4 (W4A16) kernel takes k % 32 == 0 (a lane reads a row's 1x32 group as ",
         "one 16-byte load); this weight has k = ", k);
  FISSION_CHECK(x.shape[-1] == k && out.numel() == n * m && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) &&
                    Aligned16(x.data),
                "LinearFp4 shapes x", x.shape.ToString(), " ", DTypeName(x.dtype), " w", w.shape.ToString(), " out",
                out.shape.ToString());
  if (n == 0) return;
  const std::int64_t tiles = Ceil(n, kTokens);
  const std::size_t x_elem = DTypeBytes(x.dtype, 1);
  WithKernel(x.dtype, k, [&](auto f32, auto split) {
    constexpr bool kF32 = decltype(f32)::value;
    constexpr int kSplit = decltype(split)::value;
    for (std::int64_t first = 0; first < tiles; first += kMaxGridY) {
      const std::int64_t count = std::min(kMaxGridY, tiles - first), t0 = first * kTokens;
      const dim3 grid(static_cast<unsigned>(Ceil(m, RowsPerBlock(kSplit))), static_cast<unsigned>(count));
      Fp4GemvKernel<kF32, kSplit><<<grid, kWarps * 32, 0, ctx.stream()>>>(
          static_cast<const char*>(x.data) + static_cast<std::size_t>(t0 * k) * x_elem, n - t0,
          w.ptr<std::uint8_t>(), w_scale.ptr<std::uint8_t>(), m, k,
          static_cast<char*>(out.data) + DTypeBytes(out.dtype, t0 * m), ElemOf(out));
      FISSION_LAUNCHED();
    }
  });
}

void MoeExpertsFp4(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                   std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out, float limit) {
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
    Fail("MoeExperts: the CUDA backend's FP4 (W4A16) kernel takes k % 32 == 0 in both products (a lane reads a ",
         "row's 1x32 group as one 16-byte load); these experts have hidden ", hidden, " and intermediate ", inter);
  if (n == 0) return;
  const Fp4Table gu_table = ExpertTable(ctx, gate_up, gate_up_scale, "MoeExpertsFp4 (gate_up)");
  const Fp4Table down_table = ExpertTable(ctx, down, down_scale, "MoeExpertsFp4 (down)");
  // Every size plans on the device (same kernels, no host wait); a call whose runs would not fit
  // one grid goes in slices of tokens (a prefill of tens of thousands of tokens).
  ForEachRunSlice(n, topk_ids.shape[1], experts, [&](std::int64_t t0, std::int64_t t1) {
    RoutedExperts(ctx, x.Rows(t0, t1), topk_ids.Rows(t0, t1), topk_weights.Rows(t0, t1), gu_table, down_table,
                  inter, experts, out.View(Shape{n, hidden}).Rows(t0, t1), limit);
  });
}

}  // namespace fission::kernels::cuda
