// Pieces the DeepSeek Sparse Attention kernels share (dsa_indexer.cu, dsa_topk.cu,
// dsa_sparse_mla.cu): how a query row finds its position and keys, the score order of the top-k,
// and the indexer's selection kernel.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda::dsa {

// Keys a query at `position` sees. In a pure decode step the positions come from the step's input
// block and are read on the device: a value outside what the block table reaches (`reach` keys;
// a padding row of a captured step may hold anything) is clamped so that nothing outside the table
// is read. Host-planned calls pass positions already checked and a reach they cannot exceed.
__device__ __forceinline__ int VisibleKeys(int position, int reach) {
  return position < 0 ? 1 : min(position, reach - 1) + 1;
}

// The indexer's keys a query at `position` sees when a key is an entry of `per` positions
// (kernels/dsa_ops.h's tokens_per_entry): entries [0, (position + 1) / per), the position clamped
// as above (a negative one sees none for per > 1). `reach` counts positions; per 1 is VisibleKeys.
__device__ __forceinline__ int VisibleEntries(int position, int reach, int per) {
  const int tokens = VisibleKeys(position, reach);
  return per == 1 ? tokens : tokens / per;
}

// Scores as unsigned integers of the same order (the radix select's keys): negative values
// reversed, the sign bit set on the rest; -0 counts as +0 (the reference compares them equal).
__device__ __forceinline__ std::uint32_t OrderedBits(float f) {
  std::uint32_t b = __float_as_uint(f);
  if ((b << 1) == 0) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// Where score row `slot` of a selection comes from: its query row and the index of its position.
struct TopkRow {
  std::int32_t row, pos_offset;
};

struct TopkArgs {
  const float* scores = nullptr;  // row slot s at scores + s * stride, keys [0, visible)
  std::int64_t stride = 0;
  // Per slot: the largest ordered score and the largest complement of one (so the smallest is
  // ~minmax[2s + 1]); both 0 before the scoring kernel runs.
  const std::uint32_t* minmax = nullptr;
  const TopkRow* rows = nullptr;  // null: slot s is query row s with position positions[s]
  const std::int32_t* positions = nullptr;
  int reach = 0;
  int per = 1;  // positions a key covers: a row sees VisibleEntries(position, reach, per) keys
  int topk = 0;
  int slots = 0;
  std::int32_t* out = nullptr;  // [n, topk] I32
  // Benchmarks only (bench/cuda/dsa_topk_bench.cu): when set, block 0 records clock64() at its
  // phases into probe[0, 8) (start, first pass, radix passes, gather, sort, end, the scores
  // gathered, the radix passes run).
  long long* probe = nullptr;
};

// The largest top-k the selection kernel sorts (its shared-memory sort buffer).
inline constexpr int kMaxTopk = 4096;

// One block per slot: rows that see at most topk keys get 0 .. visible - 1 then -1; the others the
// positions (entry indices when per > 1) of their topk highest scores, highest first, equal scores
// in position order (dsa_topk.cu).
void LaunchTopk(CudaContext& ctx, const TopkArgs& args);

}  // namespace fission::kernels::cuda::dsa
