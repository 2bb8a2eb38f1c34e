// The lightning indexer's selection (kernels/dsa_ops.h): for every query row, the positions of its
// topk highest scores, highest first, equal scores in position order; a row that sees at most topk
// keys selects them all in position order.
//
// One block of 1024 threads per row. The k-th highest score is found by a radix select over the
// scores' ordered bits (dsa_common.cuh): the scoring kernel leaves each row's largest and smallest
// score, whose common leading bits need no pass, and each pass histograms the next 11 bits of the
// scores still in the running (2048 bins in shared memory) and keeps the bin that holds the k-th.
// Passes stop as soon as the scores at or above the kept bin's lower bound number at most
// kMaxTopk: those are gathered (warp-aggregated atomics) into shared memory and sorted by
// (score, position) with a bitonic sort of 64-bit keys, score bits high, the complement of the
// position low, so that ties come out in position order; the first topk are the selection. With
// typical scores that is one histogram pass, one gathering pass and the sort. When more than
// kMaxTopk scores equal the k-th exactly (all 32 bits resolved), the scores above it are gathered
// and then the equal ones in position order, a block scan per 1024 scores, until topk are held.
// Rows that see at most kMaxTopk keys skip the passes and sort all their scores.
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/dsa_common.cuh"

namespace fission::kernels::cuda::dsa {
namespace {

constexpr int kThreads = 1024;
constexpr int kRadixBits = 11, kBins = 1 << kRadixBits;

using Scan = cub::BlockScan<int, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;

struct Smem {
  unsigned long long keys[kMaxTopk];
  int hist[kBins];
  Scan::TempStorage scan;
  int count;
  int digit, above, in_digit;
};

__device__ __forceinline__ unsigned long long SortKey(std::uint32_t bits, int position) {
  return (static_cast<unsigned long long>(bits) << 32) | (0xFFFFFFFFu - static_cast<std::uint32_t>(position));
}

// fn(i, bits) for every score i < visible of the row, four per load (rows are 16-byte aligned and
// padded to a multiple of 4; values past `visible` are never looked at).
template <typename Fn>
__device__ __forceinline__ void ForEachScore(const float* s, int visible, Fn fn) {
  const int quads = (visible + 3) / 4;
  for (int q = threadIdx.x; q < quads; q += kThreads) {
    const float4 v = reinterpret_cast<const float4*>(s)[q];
    const int i = 4 * q;
    fn(i, OrderedBits(v.x));
    if (i + 1 < visible) fn(i + 1, OrderedBits(v.y));
    if (i + 2 < visible) fn(i + 2, OrderedBits(v.z));
    if (i + 3 < visible) fn(i + 3, OrderedBits(v.w));
  }
}

// The digit (of `bins`, highest first) that holds the need-th highest of the histogrammed scores:
// sm.digit, the count in higher digits (sm.above) and its own count (sm.in_digit).
__device__ void FindDigit(Smem& sm, int bins, int need) {
  constexpr int kPer = kBins / kThreads;
  const int r0 = threadIdx.x * kPer;  // ranks r0 .. r0 + kPer - 1; rank 0 is the highest digit
  int local = 0;
#pragma unroll
  for (int r = r0; r < r0 + kPer; ++r)
    if (r < bins) local += sm.hist[bins - 1 - r];
  int before = 0;
  Scan(sm.scan).ExclusiveSum(local, before);
#pragma unroll
  for (int r = r0; r < r0 + kPer; ++r) {
    if (r >= bins) break;
    const int c = sm.hist[bins - 1 - r];
    if (before < need && before + c >= need) {
      sm.digit = bins - 1 - r;
      sm.above = before;
      sm.in_digit = c;
    }
    before += c;
  }
  __syncthreads();
}

// Appends (bits, position) of every score with bits >= lowest to sm.keys, in no particular order.
__device__ void Gather(Smem& sm, const float* s, int visible, std::uint32_t lowest) {
  const int lane = threadIdx.x & 31, quads = (visible + 3) / 4;
  for (int q0 = threadIdx.x - lane; q0 < quads; q0 += kThreads) {  // warp-uniform bounds
    const int q = q0 + lane;
    const float4 v = q < quads ? reinterpret_cast<const float4*>(s)[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const std::uint32_t bits[4] = {OrderedBits(v.x), OrderedBits(v.y), OrderedBits(v.z), OrderedBits(v.w)};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = 4 * q + e;
      const bool take = q < quads && i < visible && bits[e] >= lowest;
      const unsigned mask = __ballot_sync(0xffffffffu, take);
      if (mask == 0) continue;
      int base = 0;
      if (lane == 0) base = atomicAdd(&sm.count, __popc(mask));
      base = __shfl_sync(0xffffffffu, base, 0);
      if (take) sm.keys[base + __popc(mask & ((1u << lane) - 1u))] = SortKey(bits[e], i);
    }
  }
}

// Appends the first `need` scores equal to `bits`, in position order (block scans over runs of
// kThreads scores; runs without one are skipped).
__device__ void GatherTies(Smem& sm, const float* s, int visible, std::uint32_t bits, int need) {
  const int start = sm.count;
  int taken = 0;  // the same in every thread
  for (int c0 = 0; c0 < visible && taken < need; c0 += kThreads) {
    const int i = c0 + static_cast<int>(threadIdx.x);
    const int equal = (i < visible && OrderedBits(s[i]) == bits) ? 1 : 0;
    if (__syncthreads_or(equal) == 0) continue;
    int rank = 0, total = 0;
    Scan(sm.scan).ExclusiveSum(equal, rank, total);
    if (equal && taken + rank < need) sm.keys[start + taken + rank] = SortKey(bits, i);
    taken += total;
    __syncthreads();  // the scan's storage is reused
  }
  if (threadIdx.x == 0) sm.count = start + min(taken, need);
  __syncthreads();
}

// keys[0, count) sorted descending (bitonic, padded with zeros, which no score's key equals).
__device__ void SortDescending(unsigned long long* keys, int count) {
  int n = 2;
  while (n < count) n <<= 1;
  for (int i = count + static_cast<int>(threadIdx.x); i < n; i += kThreads) keys[i] = 0;
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const unsigned long long x = keys[i], y = keys[j];
          if ((i & size) == 0 ? x < y : x > y) {
            keys[i] = y;
            keys[j] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

__global__ void __launch_bounds__(kThreads) TopkKernel(const TopkArgs a) {
  __shared__ Smem sm;
  const int slot = blockIdx.x;
  int row = slot, position;
  if (a.rows != nullptr) {
    const TopkRow r = a.rows[slot];
    row = r.row;
    position = a.positions[r.pos_offset];
  } else {
    position = a.positions[slot];
  }
  const int visible = VisibleKeys(position, a.reach), k = a.topk;
  std::int32_t* out = a.out + static_cast<std::int64_t>(row) * k;
  if (visible <= k) {  // every key, in position order
    for (int j = threadIdx.x; j < k; j += kThreads) out[j] = j < visible ? j : -1;
    return;
  }
  const float* s = a.scores + static_cast<std::int64_t>(slot) * a.stride;
  if (threadIdx.x == 0) sm.count = 0;
  std::uint32_t lowest = 0;  // gather every score at or above this
  bool ties = false;
  std::uint32_t tie_bits = 0;
  int need = k;
  if (visible > kMaxTopk) {
    const std::uint32_t hi = a.minmax[2 * slot], lo = ~a.minmax[2 * slot + 1];
    const int common = lo == hi ? 32 : __clz(lo ^ hi);
    std::uint32_t mask = common == 0 ? 0u : ~0u << (32 - common);
    std::uint32_t prefix = hi & mask;
    int shift = 32 - common, above_total = 0;
    bool found = false;
    while (shift > 0) {
      const int bits = min(kRadixBits, shift);
      shift -= bits;
      const std::uint32_t digit_mask = (1u << bits) - 1u;
      for (int i = threadIdx.x; i < (1 << bits); i += kThreads) sm.hist[i] = 0;
      __syncthreads();
      ForEachScore(s, visible, [&](int, std::uint32_t u) {
        if ((u & mask) == prefix) atomicAdd(&sm.hist[(u >> shift) & digit_mask], 1);
      });
      __syncthreads();
      FindDigit(sm, 1 << bits, need);
      const std::uint32_t digit = static_cast<std::uint32_t>(sm.digit);
      const int above = sm.above, in_digit = sm.in_digit;
      prefix |= digit << shift;
      mask |= digit_mask << shift;
      need -= above;
      above_total += above;
      if (above_total + in_digit <= kMaxTopk) {
        lowest = prefix;
        found = true;
        break;
      }
    }
    if (!found) {  // prefix is the k-th score's bits; above_total scores are higher, need more equal it
      ties = true;
      tie_bits = prefix;
    }
  }
  __syncthreads();
  if (!ties) {
    Gather(sm, s, visible, lowest);
  } else {
    if (tie_bits != 0xFFFFFFFFu) Gather(sm, s, visible, tie_bits + 1u);
    __syncthreads();
    GatherTies(sm, s, visible, tie_bits, need);
  }
  __syncthreads();
  SortDescending(sm.keys, sm.count);
  for (int j = threadIdx.x; j < k; j += kThreads)
    out[j] = static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(sm.keys[j]));
}

}  // namespace

void LaunchTopk(CudaContext& ctx, const TopkArgs& args) {
  FISSION_CHECK(args.topk >= 1 && args.topk <= kMaxTopk, "the indexer's top-k takes 1 to ", kMaxTopk,
                " keys per row, got ", args.topk);
  if (args.slots == 0) return;
  TopkKernel<<<static_cast<unsigned>(args.slots), kThreads, 0, ctx.stream()>>>(args);
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda::dsa
