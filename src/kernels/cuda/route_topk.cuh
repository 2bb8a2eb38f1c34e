// The routers' expert selection, shared by DeepSeekMoE's routing (moe.cu) and DeepSeek-V4's
// (v4_streams.cu): one warp per token picks the top k of per-expert values in shared memory, in
// the CPU reference's order (larger value first, ties to the lower index), then sorts the picks
// into ascending ids, the fixed order of the weighted sum.
#pragma once

#include <cuda_runtime.h>

namespace fission::kernels::cuda {

// Better = larger value, ties to the lower index (the CPU reference's order).
__device__ __forceinline__ bool Better(float v, int i, float bv, int bi) { return v > bv || (v == bv && i < bi); }

// chosen[0, top_k) = the top_k experts of values[0, experts), in selection order; taken[e] (zeroed
// by the caller) marks the picks. Called by all 32 lanes of the warp; chosen is written by lane 0
// and visible to the warp on return.
__device__ inline void WarpTopK(const float* values, int* taken, int experts, int top_k, int* chosen) {
  const int lane = threadIdx.x & 31;
  for (int r = 0; r < top_k; ++r) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int e = lane; e < experts; e += 32)
      if (!taken[e] && Better(values[e], e, bv, bi)) {
        bv = values[e];
        bi = e;
      }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (Better(ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0) {
      chosen[r] = bi;
      taken[bi] = 1;
    }
    __syncwarp();
  }
}

// Insertion sort of a handful of ids into ascending order (one thread).
__device__ inline void SortAscending(int* ids, int count) {
  for (int i = 1; i < count; ++i)
    for (int j = i; j > 0 && ids[j - 1] > ids[j]; --j) {
      const int tmp = ids[j];
      ids[j] = ids[j - 1];
      ids[j - 1] = tmp;
    }
}

}  // namespace fission::kernels::cuda
