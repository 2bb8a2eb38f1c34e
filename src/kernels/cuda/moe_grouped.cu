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
// Tile. 128 rows × 128 weight rows, 8 warps as 2 (rows) × 4 (columns), a warp 64 rows × 32
// columns of mma.sync fragments with fp32 accumulators. A stage is 128 bytes of k (128 e4m3
// values, one activation block), copied by cp.async several stages ahead into shared memory rows
// of 128 bytes whose 16-byte chunk c sits at c ^ (row & 7): ldmatrix's 8 rows at one chunk and
// cp.async's whole rows both meet 8 distinct bank groups. Rows past an expert's end and k past the
// row are zero-filled (cp.async with 0 source bytes) and never stored; a warp skips the MMAs of its
// 16-row fragments that lie wholly past the end (the 4K-token case's ~96-row experts: a quarter of
// the work).
//
// W4A8 (GroupedGemmFp4): the activations' e4m3 codes with a power-of-two scale per 1x128
// (QuantizeFp4Input) times e2m1 weight codes with an e8m0 scale per 1x32. A stage holds the
// activations' codes and scales and the weights' packed codes and scale codes; one stage before
// their use the block decodes the codes into e4m3 (E2m1ToE4m3: 2^-6 times the value, exact) and
// the scales into floats in a double-buffered tile, so both operands reach the MMAs (m16n8k32
// e4m3) by ldmatrix. The arithmetic is the GEMV's (moe_fp4.cu): per group of 32 one MMA from zero,
// its sums times the group's weight scale added into the block's sums; per block of 128 those
// times the row's activation scale added into the accumulators; the 2^6 at the end. 5 stages (the
// block's sums double the accumulators). k % 128 == 0 (whole blocks; the GEMV takes other k).
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

// ---- FP4 (W4A8) ----

constexpr int kFp4Cols = 128, kFp4Stages = 5;
constexpr int kFp4WarpCols = kFp4Cols / 4, kFp4ColFrags = kFp4WarpCols / 8;
constexpr int kGroups = kRowBytes / 32;  // weight groups of a stage: one activation block
// A stage: the activations' codes (swizzled), the weights' packed codes (64 bytes a row, as
// stored), their four scale codes a row and the activations' scale a row. A decoded tile: the
// weights' e4m3 codes (swizzled) and their scales as floats, [group][column].
struct Fp4Smem {
  static constexpr std::size_t kA = std::size_t{kTileRows} * kRowBytes;
  static constexpr std::size_t kCodes = kA;
  static constexpr std::size_t kScaleCodes = kCodes + std::size_t{kFp4Cols} * kRowBytes / 2;
  static constexpr std::size_t kActScales = kScaleCodes + std::size_t{kFp4Cols} * kGroups;
  static constexpr std::size_t kStage = kActScales + std::size_t{kTileRows} * sizeof(float);
  static constexpr std::size_t kWeights = 0, kWeightScales = std::size_t{kFp4Cols} * kRowBytes;
  static constexpr std::size_t kDecoded = kWeightScales + std::size_t{kGroups} * kFp4Cols * sizeof(float);
  static constexpr std::size_t kBytes = kFp4Stages * kStage + 2 * kDecoded;
};
static_assert(Fp4Smem::kStage % 16 == 0 && Fp4Smem::kDecoded % 16 == 0, "16-byte aligned regions");

// A stage's weight codes and scale codes into a decoded tile: 16 e4m3 codes from 8 bytes a step.
__device__ __forceinline__ void DecodeStage(unsigned char* decoded, const unsigned char* stage) {
  constexpr int kPieces = kFp4Cols * kRowChunks;  // 16-byte chunks of the decoded tile
#pragma unroll
  for (int j = 0; j < kPieces / kThreads; ++j) {
    const int q = static_cast<int>(threadIdx.x) + j * kThreads, r = q / kRowChunks, c = q % kRowChunks;
    const uint2 raw = *reinterpret_cast<const uint2*>(stage + Fp4Smem::kCodes + r * (kRowBytes / 2) + 8 * c);
    uint4 v;
    E2m1ToE4m3(raw.x, v.x, v.y);
    E2m1ToE4m3(raw.y, v.z, v.w);
    *reinterpret_cast<uint4*>(decoded + Fp4Smem::kWeights + Swizzled(r, c)) = v;
  }
  float* scales = reinterpret_cast<float*>(decoded + Fp4Smem::kWeightScales);
#pragma unroll
  for (int j = 0; j < kFp4Cols * kGroups / kThreads; ++j) {
    const int q = static_cast<int>(threadIdx.x) + j * kThreads, col = q % kFp4Cols, g = q / kFp4Cols;
    scales[g * kFp4Cols + col] = ScaleOfExact(stage[Fp4Smem::kScaleCodes + col * kGroups + g], 0);
  }
}

// Quantized rows xq [pairs, k] (scales xs [pairs, k / 128]) times the tile's expert weight (codes
// [m, k / 2], scale codes [m, k / 32]) into out [pairs, m].
__global__ void __launch_bounds__(kThreads, 1)
    GroupedFp4Kernel(const std::uint8_t* xq, const float* xs, const ExpertRun* tiles, const std::int32_t* tile_count,
                     std::int64_t first, const std::uint8_t* const* w, const std::uint8_t* const* w_scale,
                     std::int64_t m, std::int64_t k, void* out, Elem oe) {
  const std::int64_t index = first + blockIdx.y;
  if (tile_count != nullptr && index >= *tile_count) return;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* decoded = smem + kFp4Stages * Fp4Smem::kStage;
  const ExpertRun tile = tiles[index];
  const std::int64_t col0 = std::int64_t{blockIdx.x} * kFp4Cols, blocks = k / kRowBytes;
  const std::uint8_t* rows = xq + tile.row0 * k;
  const float* row_scales = xs + tile.row0 * blocks;
  const std::uint8_t* codes = w[tile.expert];
  const std::uint8_t* scale_codes = w_scale[tile.expert];
  const auto a_row = [&](int r) { return r < tile.rows ? rows + r * k : nullptr; };
  const int stages = static_cast<int>(blocks);
  const auto load = [&](int i) {
    if (i < stages) {
      unsigned char* s = smem + (i % kFp4Stages) * Fp4Smem::kStage;
      CopyStage<kTileRows>(s, a_row, std::int64_t{i} * kRowBytes, k, xq);
      constexpr int kCodeChunks = kRowBytes / 2 / 16;  // 16-byte chunks of a weight row's codes a stage
#pragma unroll
      for (int j = 0; j < kFp4Cols * kCodeChunks / kThreads; ++j) {
        const int q = static_cast<int>(threadIdx.x) + j * kThreads, r = q / kCodeChunks, c = q % kCodeChunks;
        const bool ok = col0 + r < m;
        CpAsync16(s + Fp4Smem::kCodes + r * (kRowBytes / 2) + 16 * c,
                  ok ? codes + (col0 + r) * (k / 2) + std::int64_t{i} * (kRowBytes / 2) + 16 * c : codes, ok ? 16 : 0);
      }
      const int r = threadIdx.x % kTileRows;
      if (threadIdx.x < kTileRows) {  // the four scale codes of weight row col0 + r
        const bool ok = col0 + r < m;
        CpAsync4(s + Fp4Smem::kScaleCodes + r * kGroups,
                 ok ? scale_codes + (col0 + r) * (k / 32) + std::int64_t{i} * kGroups : scale_codes, ok ? 4 : 0);
      } else {  // the activation scale of tile row r
        const bool ok = r < tile.rows;
        CpAsync4(s + Fp4Smem::kActScales + r * sizeof(float), ok ? row_scales + r * blocks + i : xs, ok ? 4 : 0);
      }
    }
    CpAsyncCommit();
  };
  for (int i = 0; i < kFp4Stages - 1; ++i) load(i);
  CpAsyncWait<kFp4Stages - 2>();
  __syncthreads();
  DecodeStage(decoded, smem);

  const WarpPlace w_at = PlaceOf(tile.rows);
  float acc[kRowFrags][kFp4ColFrags][4] = {};
  for (int i = 0; i < stages; ++i) {
    // Stage i + 1 has landed and stage i's decoded tile is visible; the slots of stage i - 1 and
    // the decoded tile of stage i - 1 are no longer read.
    CpAsyncWait<kFp4Stages - 3>();
    __syncthreads();
    load(i + kFp4Stages - 1);
    if (i + 1 < stages)
      DecodeStage(decoded + ((i + 1) & 1) * Fp4Smem::kDecoded, smem + ((i + 1) % kFp4Stages) * Fp4Smem::kStage);
    if (w_at.live == 0) continue;
    const unsigned char* stage = smem + (i % kFp4Stages) * Fp4Smem::kStage;
    const unsigned char* dec = decoded + (i & 1) * Fp4Smem::kDecoded;
    const float* wsc = reinterpret_cast<const float*>(dec + Fp4Smem::kWeightScales);
    float block[kRowFrags][kFp4ColFrags][4];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      std::uint32_t bf[kFp4ColFrags][2];
      LoadB<kFp4ColFrags>(bf, dec + Fp4Smem::kWeights, w_at.wn * kFp4WarpCols, g);
      float2 sc[kFp4ColFrags];
#pragma unroll
      for (int nf = 0; nf < kFp4ColFrags; ++nf)
        sc[nf] = *reinterpret_cast<const float2*>(wsc + g * kFp4Cols + w_at.wn * kFp4WarpCols + 8 * nf + 2 * w_at.t);
#pragma unroll
      for (int mf = 0; mf < kRowFrags; ++mf) {
        if (mf >= w_at.live) continue;
        std::uint32_t af[4];
        LoadA(af, stage, w_at.wm * kWarpRows + 16 * mf, g);
#pragma unroll
        for (int nf = 0; nf < kFp4ColFrags; ++nf) {
          float d[4];
          MmaE4m3Product(d, af[0], af[1], af[2], af[3], bf[nf][0], bf[nf][1]);
          // Slots 0 and 2 are column 2t (scale .x), 1 and 3 column 2t + 1 (.y).
          float* b = block[mf][nf];
          b[0] = fmaf(d[0], sc[nf].x, g == 0 ? 0.0f : b[0]);
          b[1] = fmaf(d[1], sc[nf].y, g == 0 ? 0.0f : b[1]);
          b[2] = fmaf(d[2], sc[nf].x, g == 0 ? 0.0f : b[2]);
          b[3] = fmaf(d[3], sc[nf].y, g == 0 ? 0.0f : b[3]);
        }
      }
    }
    const float* act_scale = reinterpret_cast<const float*>(stage + Fp4Smem::kActScales);
#pragma unroll
    for (int mf = 0; mf < kRowFrags; ++mf) {
      if (mf >= w_at.live) continue;
      const int r = w_at.wm * kWarpRows + 16 * mf + w_at.gid;
      const float xa = act_scale[r], xb = act_scale[r + 8];
#pragma unroll
      for (int nf = 0; nf < kFp4ColFrags; ++nf) {
        acc[mf][nf][0] = fmaf(block[mf][nf][0], xa, acc[mf][nf][0]);
        acc[mf][nf][1] = fmaf(block[mf][nf][1], xa, acc[mf][nf][1]);
        acc[mf][nf][2] = fmaf(block[mf][nf][2], xb, acc[mf][nf][2]);
        acc[mf][nf][3] = fmaf(block[mf][nf][3], xb, acc[mf][nf][3]);
      }
    }
  }
  StoreTile<kFp4ColFrags>(acc, w_at, tile, col0 + w_at.wn * kFp4WarpCols, m, 64.0f, out, oe);  // the decode's 2^-6
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

bool GroupedGemmFp4Takes(std::int64_t k) { return k > 0 && k % kRowBytes == 0; }

void GroupedGemmFp4(CudaContext& ctx, const Fp4Input& x, const ExpertRun* tiles, const std::int32_t* tile_count,
                    std::int64_t max_tiles, const void* const* expert_codes, const void* const* expert_scales,
                    std::int64_t m, const Tensor& out) {
  const Tensor codes = x.codes.tensor();
  const std::int64_t k = codes.shape[-1], pairs = codes.numel() / k;
  FISSION_CHECK(GroupedGemmFp4Takes(k) && codes.dtype == DType::kF8E4M3 &&
                    x.scales.tensor().numel() == pairs * (k / kRowBytes) && Aligned16(codes.data) &&
                    Aligned16(out.data) && out.shape[-1] == m && out.numel() / m == pairs,
                "GroupedGemmFp4 takes e4m3 rows [pairs, k] with k % 128 == 0 (whole activation blocks) into a "
                "16-byte aligned out [pairs, ", m, "]; got x ", codes.shape.ToString(), " ", DTypeName(codes.dtype),
                ", out ", out.shape.ToString());
  if (max_tiles == 0 || pairs == 0) return;
  const auto* w = reinterpret_cast<const std::uint8_t* const*>(expert_codes);
  const auto* ws = reinterpret_cast<const std::uint8_t* const*>(expert_scales);
  AllowSharedMemory<GroupedFp4Kernel>(ctx, Fp4Smem::kBytes);
  const unsigned col_tiles = static_cast<unsigned>((m + kFp4Cols - 1) / kFp4Cols);
  ForEachGridSlice(max_tiles, [&](std::int64_t first, unsigned count) {
    GroupedFp4Kernel<<<dim3(col_tiles, count), kThreads, Fp4Smem::kBytes, ctx.stream()>>>(
        x.codes.ptr<std::uint8_t>(), x.scales.ptr<float>(), tiles, tile_count, first, w, ws, m, k, out.data,
        ElemOf(out));
    FISSION_LAUNCHED();
  });
}

}  // namespace fission::kernels::cuda
