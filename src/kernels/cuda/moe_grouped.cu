// DeepSeek-V4's FP4 routed experts' prefill products (W4A8, moe_fp4.cu's format) as grouped GEMMs
// on the tensor cores: one launch per product (gate_up, down) covers the rows of every expert,
// where the 8-row GEMV ran a launch's worth of blocks per run. At DeepSeek-V4-Flash's shapes
// (hidden 4096, moe_intermediate 2048, 256 experts, top-6) an expert has about 96 rows at 4K tokens
// and 384 at 16K: too few for a GEMM of its own to fill the chip, enough for tensor-core tiles.
// (The same tile in bf16 for bf16 experts was measured slower than one cuBLASLt GEMM per expert
// and not kept: docs/benchmarks.md, 2026-12-04 late.)
//
// Work list. The rows are grouped by expert (moe.cu's permutation); a row tile is up to 128 rows
// of one expert (ExpertRun: expert, first row, rows), listed on the device (PermuteByExpertOnDevice
// with 128-row runs), so the step stays capturable. blockIdx.y picks the row tile, blockIdx.x the
// tile of weight rows (output columns): consecutive blocks share their rows while they sweep the
// expert's weight, and an expert's row tiles are resident together, so its weight comes from HBM
// about once. Blocks past the listed count return at once.
//
// Tile. 128 rows × 256 weight rows, 8 warps as 2 (rows) × 4 (columns), a warp 64 rows × 64
// columns of mma.sync m16n8k16 bf16 fragments with fp32 accumulators. W4A8's products are exact
// bf16 products: an activation's e4m3 code times its block's power of two, and a weight's e2m1
// code times its group's e8m0 power of two, are both bf16 values, and two bf16 values multiply
// exactly in fp32. So the activations are expanded to bf16 once (DequantizeKernel) and the weights
// a stage at a time in shared memory (e2m1 -> e4m3 by E2m1ToE4m3, e4m3 pairs -> f16 -> fp32 times
// the scale, packed to bf16), and the tile is a plain bf16 GEMM: the products are the GEMV's
// (moe_fp4.cu), summed in another fp32 order. (A tile of e4m3 MMAs with the group scales on its
// fp32 sums, one MMA from zero per group and four FMAs after it, was instruction-bound at 144
// TFLOP/s; this one reaches 181: docs/benchmarks.md, 2026-12-04 late.)
// A stage is 128 bytes of k (64 bf16 values) of the activation rows and 32 bytes of each weight
// row's codes, copied by cp.async four stages deep into shared memory rows whose 16-byte chunk c
// sits at c ^ (row & 7): ldmatrix's 8 rows at one chunk and cp.async's whole rows both meet 8
// distinct bank groups. The weights are decoded one stage ahead into a double-buffered tile; their
// scale codes for all of k are copied once (k / 32 bytes a row). Rows past an expert's end and k
// past the row are zero-filled (cp.async with 0 source bytes) and never stored; a warp skips the
// MMAs of its 16-row fragments that lie wholly past the end (the 4K-token case's ~96-row experts:
// a quarter of the work). k % 128 == 0 (whole activation blocks; the GEMV takes other k), and the
// scale codes must fit shared memory (k up to 7,680).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/e2m1.cuh"
#include "kernels/cuda/mla_flash.cuh"
#include "kernels/cuda/mma_gemv.cuh"

namespace fission::kernels::cuda {
namespace {

using mla::CpAsync16;
using mla::CpAsyncCommit;
using mla::CpAsyncWait;
using mla::LdMatrixX4;
using mla::SmemAddr;

constexpr int kTileRows = kGroupedTileRows;
constexpr int kThreads = 256;
constexpr int kRowBytes = 128, kRowChunks = kRowBytes / 16;  // a tile row's bytes of one stage
constexpr int kWarpRows = 64, kRowFrags = kWarpRows / 16;
constexpr std::size_t kMaxGroupedSmem = 227 * 1024;  // sm_90's largest dynamic shared memory a block

__device__ __forceinline__ int Swizzled(int r, int c) { return r * kRowBytes + ((c ^ (r & 7)) << 4); }

__device__ __forceinline__ void CpAsync4(void* smem_dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(SmemAddr(smem_dst)), "l"(src), "r"(src_bytes));
}

// One stage of a swizzled tile of kRows rows: chunk c of row r from row(r) + kb + 16 c; zeros where
// row(r) is null or past k_bytes (`any`, a valid global address, stands in as the source).
template <int kRows, class Row>
__device__ __forceinline__ void CopyStage(unsigned char* tile, const Row& row, std::int64_t kb, std::int64_t k_bytes,
                                          const void* any) {
#pragma unroll
  for (int j = 0; j < kRows * kRowChunks / kThreads; ++j) {
    const int q = static_cast<int>(threadIdx.x) + j * kThreads, r = q / kRowChunks, c = q % kRowChunks;
    const unsigned char* src = row(r);
    const std::int64_t at = kb + 16 * c;
    const bool ok = src != nullptr && at < k_bytes;
    CpAsync16(tile + Swizzled(r, c), ok ? src + at : any, ok ? 16 : 0);
  }
}

// Where a thread sits: lane (gid, t), the warp's 64-row half (wm) and column quarter (wn) of the
// tile, and how many of its 16-row fragments hold rows of the expert (the others skip their MMAs).
struct WarpPlace {
  int gid, t, wm, wn, live;
};
__device__ __forceinline__ WarpPlace PlaceOf(int rows) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp >> 2, live = (rows - wm * kWarpRows + 15) / 16;
  return {lane >> 2, lane & 3, wm, warp & 3, live < 0 ? 0 : live > kRowFrags ? kRowFrags : live};
}

// A fragment of tile rows [r0, r0 + 16) at k-step s; B fragments of columns [c0, c0 + 16): b[0], b[1]
// for columns c0..c0+7 and b[2], b[3] for c0+8..c0+15 (the weight is stored column by column).
__device__ __forceinline__ void LoadA(std::uint32_t (&a)[4], const unsigned char* tile, int r0, int s) {
  const int lane = threadIdx.x & 31;
  LdMatrixX4(a, tile + Swizzled(r0 + (lane & 15), 2 * s + (lane >> 4)));
}
template <int kColFrags>
__device__ __forceinline__ void LoadB(std::uint32_t (&b)[kColFrags][2], const unsigned char* tile, int c0, int s) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int p = 0; p < kColFrags / 2; ++p) {
    std::uint32_t v[4];
    LdMatrixX4(v, tile + Swizzled(c0 + 16 * p + (lane & 7) + ((lane >> 4) << 3), 2 * s + ((lane >> 3) & 1)));
    b[2 * p][0] = v[0];
    b[2 * p][1] = v[1];
    b[2 * p + 1][0] = v[2];
    b[2 * p + 1][1] = v[3];
  }
}

// Columns col, col + 1 of out row `row` ([*, cols]): one store when both are inside and the row
// length is even (out is 16-byte aligned), else one at a time.
__device__ __forceinline__ void StorePair(void* out, Elem oe, std::int64_t row, std::int64_t cols, std::int64_t col,
                                          float v0, float v1) {
  if (col >= cols) return;
  const std::int64_t i = row * cols + col;
  if (col + 1 < cols && cols % 2 == 0) {
    if (oe == Elem::kF32)
      *reinterpret_cast<float2*>(static_cast<float*>(out) + i) = make_float2(v0, v1);
    else
      *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + i) = __floats2bfloat162_rn(v0, v1);
    return;
  }
  StoreF(out, i, oe, v0);
  if (col + 1 < cols) StoreF(out, i + 1, oe, v1);
}

// The accumulators times `factor` into out [pairs, cols]: fragment (mf, nf) holds tile rows
// 64 wm + 16 mf + gid (slots 0, 1) and + 8 (slots 2, 3), columns col0 + 8 nf + 2t and + 1.
template <int kColFrags>
__device__ __forceinline__ void StoreTile(const float (&acc)[kRowFrags][kColFrags][4], const WarpPlace& w,
                                          const ExpertRun& tile, std::int64_t col0, std::int64_t cols, float factor,
                                          void* out, Elem oe) {
#pragma unroll
  for (int mf = 0; mf < kRowFrags; ++mf)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.wm * kWarpRows + 16 * mf + w.gid + 8 * h;
      if (r >= tile.rows) continue;
#pragma unroll
      for (int nf = 0; nf < kColFrags; ++nf)
        StorePair(out, oe, tile.row0 + r, cols, col0 + 8 * nf + 2 * w.t, acc[mf][nf][2 * h] * factor,
                  acc[mf][nf][2 * h + 1] * factor);
    }
}

// ---- FP4 (W4A8) as an exact bf16 product ----

constexpr int kFp4Cols = 256, kFp4Stages = 4;
constexpr int kFp4WarpCols = kFp4Cols / 4, kFp4ColFrags = kFp4WarpCols / 8;
constexpr int kStageValues = kRowBytes / 2;        // k values a stage: 128 bytes of bf16 a row
constexpr int kStageGroups = kStageValues / 32;    // weight groups of a stage
constexpr int kSteps = kRowBytes / 32;             // m16n8k16 k-steps a stage
constexpr int kScalePad = 16;                      // bytes past a row's scale codes (banks, alignment)
// A stage: the activations (bf16, swizzled) and the weights' packed codes (32 bytes a row, as
// stored). A decoded tile: the weights as bf16 (swizzled). The weights' scale codes for the whole
// of k, a row of k / 32 + kScalePad bytes each, are copied once.
struct Fp4Smem {
  static constexpr std::size_t kA = std::size_t{kTileRows} * kRowBytes;
  static constexpr std::size_t kCodes = kA;
  static constexpr std::size_t kStage = kCodes + std::size_t{kFp4Cols} * kStageValues / 2;
  static constexpr std::size_t kDecoded = std::size_t{kFp4Cols} * kRowBytes;
  static constexpr std::size_t kScales = kFp4Stages * kStage + 2 * kDecoded;
  __host__ __device__ static std::size_t ScaleRow(std::int64_t k) { return static_cast<std::size_t>((k / 32 + 15) / 16 * 16 + kScalePad); }
  __host__ __device__ static std::size_t Bytes(std::int64_t k) { return kScales + kFp4Cols * ScaleRow(k); }
};
static_assert(Fp4Smem::kStage % 16 == 0 && Fp4Smem::kDecoded % 16 == 0, "16-byte aligned regions");

// Eight e2m1 codes (w, value i in nibble i) times their group's e8m0 scale as eight bf16: through
// e4m3 (E2m1ToE4m3: 2^-6 times the value) and f16 pairs, then times scale · 2^6 in fp32. Every
// step is exact (a code times a power of two is a bf16 value; 0xFF gives NaN, as the GEMV's).
__device__ __forceinline__ uint4 DecodeToBf16(std::uint32_t w, float scale64) {
  std::uint32_t e[2];
  E2m1ToE4m3(w, e[0], e[1]);
  std::uint32_t out[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const auto pair = static_cast<__nv_fp8x2_storage_t>(e[h >> 1] >> (16 * (h & 1)));
    const __half2 f = __half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3));
    const float2 v = __half22float2(f);
    out[h] = Bf16Pair(v.x * scale64, v.y * scale64);
  }
  return make_uint4(out[0], out[1], out[2], out[3]);
}

// A stage's weight codes into a decoded tile (chunk c of row r: values 8c .. 8c + 7 of the stage,
// group c / 4), scales from the whole-k scale codes.
__device__ __forceinline__ void DecodeStage(unsigned char* decoded, const unsigned char* stage,
                                            const unsigned char* scale_codes, std::size_t scale_row, int i) {
  constexpr int kChunks = kStageValues / 8;  // 16-byte chunks of a decoded row
#pragma unroll
  for (int j = 0; j < kFp4Cols * kChunks / kThreads; ++j) {
    const int q = static_cast<int>(threadIdx.x) + j * kThreads, r = q / kChunks, c = q % kChunks;
    const std::uint32_t w = *reinterpret_cast<const std::uint32_t*>(stage + Fp4Smem::kCodes + r * (kStageValues / 2) + 4 * c);
    const float scale = ScaleOfExact(scale_codes[r * scale_row + i * kStageGroups + c / 4], 0);
    *reinterpret_cast<uint4*>(decoded + Swizzled(r, c)) = DecodeToBf16(w, scale * 64.0f);
  }
}

// bf16 rows x [pairs, k] (the quantized activations' exact values) times the tile's expert weight
// (codes [m, k / 2], scale codes [m, k / 32]) into out [pairs, m].
__global__ void __launch_bounds__(kThreads, 1)
    GroupedFp4Kernel(const __nv_bfloat16* x, const ExpertRun* tiles, const std::int32_t* tile_count,
                     std::int64_t first, const std::uint8_t* const* w, const std::uint8_t* const* w_scale,
                     std::int64_t m, std::int64_t k, void* out, Elem oe) {
  const std::int64_t index = first + blockIdx.y;
  if (tile_count != nullptr && index >= *tile_count) return;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* decoded = smem + kFp4Stages * Fp4Smem::kStage;
  unsigned char* scale_codes = smem + Fp4Smem::kScales;
  const ExpertRun tile = tiles[index];
  const std::int64_t col0 = std::int64_t{blockIdx.x} * kFp4Cols, ld = 2 * k;
  const auto* rows = reinterpret_cast<const unsigned char*>(x) + tile.row0 * ld;
  const std::uint8_t* codes = w[tile.expert];
  const std::size_t scale_row = Fp4Smem::ScaleRow(k);
  const auto a_row = [&](int r) { return r < tile.rows ? rows + r * ld : nullptr; };
  const int stages = static_cast<int>(k / kStageValues);
  // The weights' scale codes for all of k (k / 32 bytes a row, a multiple of 4): 16-byte copies
  // when every row's codes are 16-byte aligned, else 4-byte ones.
  {
    const std::uint8_t* scales = w_scale[tile.expert];
    const std::int64_t row_bytes = k / 32;
    const int piece = row_bytes % 16 == 0 ? 16 : 4, pieces = static_cast<int>(row_bytes / piece);
    for (int q = threadIdx.x; q < kFp4Cols * pieces; q += kThreads) {
      const int r = q / pieces, at = (q % pieces) * piece;
      const bool ok = col0 + r < m;
      const std::uint8_t* src = ok ? scales + (col0 + r) * row_bytes + at : scales;
      if (piece == 16)
        CpAsync16(scale_codes + r * scale_row + at, src, ok ? 16 : 0);
      else
        CpAsync4(scale_codes + r * scale_row + at, src, ok ? 4 : 0);
    }
  }
  const auto load = [&](int i) {
    if (i < stages) {
      unsigned char* s = smem + (i % kFp4Stages) * Fp4Smem::kStage;
      CopyStage<kTileRows>(s, a_row, std::int64_t{i} * kRowBytes, ld, x);
      constexpr int kCodeChunks = kStageValues / 2 / 16;  // 16-byte chunks of a weight row's codes a stage
#pragma unroll
      for (int j = 0; j < kFp4Cols * kCodeChunks / kThreads; ++j) {
        const int q = static_cast<int>(threadIdx.x) + j * kThreads, r = q / kCodeChunks, c = q % kCodeChunks;
        const bool ok = col0 + r < m;
        CpAsync16(s + Fp4Smem::kCodes + r * (kStageValues / 2) + 16 * c,
                  ok ? codes + (col0 + r) * (k / 2) + std::int64_t{i} * (kStageValues / 2) + 16 * c : codes,
                  ok ? 16 : 0);
      }
    }
    CpAsyncCommit();  // an empty group past the end keeps the wait counts uniform
  };
  for (int i = 0; i < kFp4Stages - 1; ++i) load(i);  // the scale codes ride in stage 0's group
  CpAsyncWait<kFp4Stages - 2>();
  __syncthreads();
  DecodeStage(decoded, smem, scale_codes, scale_row, 0);

  const WarpPlace w_at = PlaceOf(tile.rows);
  float acc[kRowFrags][kFp4ColFrags][4] = {};
  for (int i = 0; i < stages; ++i) {
    // Stage i + 1 has landed and stage i's decoded tile is visible; the slots of stage i - 1 and
    // the decoded tile of stage i - 1 are no longer read.
    CpAsyncWait<kFp4Stages - 3>();
    __syncthreads();
    load(i + kFp4Stages - 1);
    if (i + 1 < stages)
      DecodeStage(decoded + ((i + 1) & 1) * Fp4Smem::kDecoded, smem + ((i + 1) % kFp4Stages) * Fp4Smem::kStage,
                  scale_codes, scale_row, i + 1);
    if (w_at.live == 0) continue;
    const unsigned char* a = smem + (i % kFp4Stages) * Fp4Smem::kStage;
    const unsigned char* b = decoded + (i & 1) * Fp4Smem::kDecoded;
#pragma unroll
    for (int st = 0; st < kSteps; ++st) {
      std::uint32_t bf[kFp4ColFrags][2];
      LoadB<kFp4ColFrags>(bf, b, w_at.wn * kFp4WarpCols, st);
#pragma unroll
      for (int mf = 0; mf < kRowFrags; ++mf) {
        if (mf >= w_at.live) continue;
        std::uint32_t af[4];
        LoadA(af, a, w_at.wm * kWarpRows + 16 * mf, st);
#pragma unroll
        for (int nf = 0; nf < kFp4ColFrags; ++nf)
          MmaBf16(acc[mf][nf], af[0], af[1], af[2], af[3], bf[nf][0], bf[nf][1]);
      }
    }
  }
  StoreTile<kFp4ColFrags>(acc, w_at, tile, col0 + w_at.wn * kFp4WarpCols, m, 1.0f, out, oe);
}

// The quantized activations' exact values as bf16 (an e4m3 code times its block's power of two),
// eight a thread.
__global__ void DequantizeKernel(const std::uint8_t* codes, const float* scales, std::int64_t n, std::int64_t k,
                                 __nv_bfloat16* out) {
  const std::int64_t i = (blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x) * 8;
  if (i >= n * k) return;
  const float scale = scales[(i / k) * (k / kRowBytes) + (i % k) / kRowBytes];
  const uint2 c = *reinterpret_cast<const uint2*>(codes + i);
  std::uint32_t o[4];
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const auto pair = static_cast<__nv_fp8x2_storage_t>((h < 2 ? c.x : c.y) >> (16 * (h & 1)));
    const float2 v = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3)));
    o[h] = Bf16Pair(v.x * scale, v.y * scale);
  }
  *reinterpret_cast<uint4*>(out + i) = make_uint4(o[0], o[1], o[2], o[3]);
}

// Dynamic shared memory past 48 KB is a function attribute, set once per device.
template <auto kKernel>
void AllowSharedMemory(CudaContext& ctx, std::size_t bytes) {
  static std::atomic<std::uint64_t> configured{0};
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// launch(first, count) over slices of the tile list that fit one grid's kMaxGridY rows.
template <class Launch>
void ForEachGridSlice(std::int64_t max_tiles, const Launch& launch) {
  for (std::int64_t first = 0; first < max_tiles; first += kMaxGridY)
    launch(first, static_cast<unsigned>(std::min(kMaxGridY, max_tiles - first)));
}

}  // namespace

bool GroupedGemmFp4Takes(std::int64_t k) {
  return k > 0 && k % kRowBytes == 0 && Fp4Smem::Bytes(k) <= kMaxGroupedSmem;
}

void GroupedGemmFp4(CudaContext& ctx, const Fp4Input& x, const ExpertRun* tiles, const std::int32_t* tile_count,
                    std::int64_t max_tiles, const void* const* expert_codes, const void* const* expert_scales,
                    std::int64_t m, const Tensor& out) {
  const Tensor codes = x.codes.tensor();
  const std::int64_t k = codes.shape[-1], pairs = codes.numel() / k;
  FISSION_CHECK(GroupedGemmFp4Takes(k) && codes.dtype == DType::kF8E4M3 &&
                    x.scales.tensor().numel() == pairs * (k / kRowBytes) && Aligned16(codes.data) &&
                    Aligned16(out.data) && out.shape[-1] == m && out.numel() / m == pairs,
                "GroupedGemmFp4 takes e4m3 rows [pairs, k] with k % 128 == 0 (whole activation blocks) and k ≤ ",
                ((kMaxGroupedSmem - Fp4Smem::kScales) / kFp4Cols - kScalePad) / 16 * 16 * 32,
                " (its scale codes in shared memory) into a 16-byte aligned out [pairs, ", m, "]; got x ",
                codes.shape.ToString(), " ", DTypeName(codes.dtype), ", out ", out.shape.ToString());
  if (max_tiles == 0 || pairs == 0) return;
  Buffer rows(DType::kBF16, Shape{pairs, k}, ctx.allocator());
  DequantizeKernel<<<static_cast<unsigned>((pairs * k / 8 + 255) / 256), 256, 0, ctx.stream()>>>(
      x.codes.ptr<std::uint8_t>(), x.scales.ptr<float>(), pairs, k, rows.ptr<__nv_bfloat16>());
  FISSION_LAUNCHED();
  const auto* w = reinterpret_cast<const std::uint8_t* const*>(expert_codes);
  const auto* ws = reinterpret_cast<const std::uint8_t* const*>(expert_scales);
  const std::size_t smem = Fp4Smem::Bytes(k);
  AllowSharedMemory<GroupedFp4Kernel>(ctx, kMaxGroupedSmem);
  const unsigned col_tiles = static_cast<unsigned>((m + kFp4Cols - 1) / kFp4Cols);
  ForEachGridSlice(max_tiles, [&](std::int64_t first, unsigned count) {
    GroupedFp4Kernel<<<dim3(col_tiles, count), kThreads, smem, ctx.stream()>>>(
        rows.ptr<__nv_bfloat16>(), tiles, tile_count, first, w, ws, m, k, out.data, ElemOf(out));
    FISSION_LAUNCHED();
  });
}

}  // namespace fission::kernels::cuda
