// The lightning indexer's selection (kernels/dsa_ops.h): for every query row, the positions of its
// topk highest scores, highest first, equal scores in position order; a row that sees at most topk
// keys selects them all in position order. With keys of several positions (DeepSeek-V4's CSA
// entries) the scores are per entry, and "position" is the entry's index throughout.
//
// One block of 1024 threads per row. The scoring kernel leaves each row's largest and smallest
// score. A first pass histograms the scores over [smallest, largest] in 2048 equal bins (shared
// memory) and finds the bin that holds the k-th highest; when the scores in it and above number at
// most kMaxTopk (a typical row: the top of a score distribution is sparse), they are gathered
// (warp-aggregated atomics) into shared memory and sorted by (score, position) with a bitonic sort
// of 64-bit keys, score bits high, the complement of the position low, so that ties come out in
// position order; the first topk are the selection. When no bin at or above it holds more than 48
// scores (nearly always), the gathering is a bucket sort instead: the first pass's counts give each
// bin its place, the scores are placed by bin and each key ranks itself within its bin (the bitonic
// sort of ~2050 keys padded to 4096 took 47 of a 32K row's 69 us). Otherwise a radix select over the scores'
// ordered bits (dsa_common.cuh) takes over: the common leading bits of the largest and smallest need
// no pass, each pass histograms the next 11 bits of the scores still in the running and keeps the
// bin that holds the k-th, and the passes stop as soon as at most kMaxTopk scores lie at or above
// the kept bin's lower bound, which are gathered and sorted the same way. When more than kMaxTopk
// scores equal the k-th exactly (all 32 bits resolved), the scores above it are gathered and then
// the equal ones in position order, a block scan per 1024 scores, until topk are held. Rows that
// see at most kMaxTopk keys skip the passes and sort all their scores.
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

// fn(score) for every score i < visible of the row, four per load (rows are 16-byte aligned and
// padded to a multiple of 4; values past `visible` are never looked at).
// kUnroll loads are issued before the first is used: a row's scores come from L2 or HBM, and a
// loop with one load in flight a thread waits for every one.
constexpr int kUnroll = 4;
template <typename Fn>
__device__ __forceinline__ void ForEachScore(const float* s, int visible, Fn fn) {
  const int quads = (visible + 3) / 4;
  for (int q0 = threadIdx.x; q0 < quads; q0 += kThreads * kUnroll) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = q0 + u * kThreads;
      v[u] = q < quads ? reinterpret_cast<const float4*>(s)[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = 4 * (q0 + u * kThreads);
      if (i < visible) fn(v[u].x, i);
      if (i + 1 < visible) fn(v[u].y, i + 1);
      if (i + 2 < visible) fn(v[u].z, i + 2);
      if (i + 3 < visible) fn(v[u].w, i + 3);
    }
  }
}

__device__ __forceinline__ float FromOrderedBits(std::uint32_t u) {
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7FFFFFFFu) : ~u);
}

// The first pass's bins: [lo, hi] in kBins equal steps. Monotone in the score (a subtraction and
// a product, each rounded monotonically, then truncated), and the same instructions wherever it is
// used, so the histogram and the gathering agree on every score's bin.
__device__ __forceinline__ int LinearBin(float v, float lo, float inv) {
  const float x = (v - lo) * inv;
  return x >= static_cast<float>(kBins - 1) ? kBins - 1 : (x > 0.0f ? static_cast<int>(x) : 0);
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

// Appends (bits, position) of every score that take(score, bits) accepts to sm.keys, in no
// particular order.
template <typename Take>
__device__ void Gather(Smem& sm, const float* s, int visible, Take take_score) {
  const int lane = threadIdx.x & 31, quads = (visible + 3) / 4;
  for (int q0 = threadIdx.x - lane; q0 < quads; q0 += kThreads * kUnroll) {  // warp-uniform bounds
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = q0 + u * kThreads + lane;
      v[u] = q < quads ? reinterpret_cast<const float4*>(s)[q] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int q = q0 + u * kThreads + lane;
      const float f[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * q + e;
        const std::uint32_t bits = OrderedBits(f[e]);
        const bool take = q < quads && i < visible && take_score(f[e], bits);
        const unsigned mask = __ballot_sync(0xffffffffu, take);
        if (mask == 0) continue;
        int base = 0;
        if (lane == 0) base = atomicAdd(&sm.count, __popc(mask));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (take) sm.keys[base + __popc(mask & ((1u << lane) - 1u))] = SortKey(bits, i);
      }
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

// The linear path's gathering as a bucket sort: the first pass's counts of the bins at or above
// `lowest_bin`, scanned from the highest bin down, become each bin's start in sm.keys (in place in
// sm.hist); every score of such a bin is appended at its bin's cursor; then every key finds its place
// in its bin by counting the bin's larger keys. Bins are monotone in the score, so the bins' order and each
// bin's own give the whole order. Returns false, having done nothing, when a bin holds more than
// kMaxBin scores (the caller gathers and sorts the whole set instead).
constexpr int kMaxBin = 48;
__device__ bool BucketSort(Smem& sm, const float* s, int visible, float lo, float inv, int lowest_bin) {
  constexpr int kPer = kBins / kThreads;
  const int r0 = threadIdx.x * kPer;  // ranks r0 .. r0 + kPer - 1, rank 0 the highest bin
  int local = 0;
  bool crowded = false;
#pragma unroll
  for (int r = r0; r < r0 + kPer; ++r) {
    const int b = kBins - 1 - r;
    if (b >= lowest_bin) {
      local += sm.hist[b];
      crowded = crowded || sm.hist[b] > kMaxBin;
    }
  }
  if (__syncthreads_or(crowded)) return false;
  int before = 0, total = 0;
  Scan(sm.scan).ExclusiveSum(local, before, total);
#pragma unroll
  for (int r = r0; r < r0 + kPer; ++r) {
    const int b = kBins - 1 - r;
    const int c = b >= lowest_bin ? sm.hist[b] : 0;
    sm.hist[b] = before;  // the bin's start
    before += c;
  }
  if (threadIdx.x == 0) sm.count = total;
  __syncthreads();
  ForEachScore(s, visible, [&](float v, int i) {
    const int b = LinearBin(v, lo, inv);
    if (b >= lowest_bin) sm.keys[atomicAdd(&sm.hist[b], 1)] = SortKey(OrderedBits(v), i);
  });
  __syncthreads();  // sm.hist[b] is now bin b's end, which is bin b - 1's start
  // Each key's place in its bin: the keys of the bin above it (keys are distinct), counted by the
  // key's own thread, independent loads rather than a chain of shifts.
  constexpr int kPerThread = kMaxTopk / kThreads;
  unsigned long long mine[kPerThread];
  int place[kPerThread];
#pragma unroll
  for (int u = 0; u < kPerThread; ++u) {
    const int x = threadIdx.x + u * kThreads;
    place[u] = -1;
    if (x >= total) continue;
    const unsigned long long key = sm.keys[x];
    const int b = LinearBin(FromOrderedBits(static_cast<std::uint32_t>(key >> 32)), lo, inv);
    const int begin = b == kBins - 1 ? 0 : sm.hist[b + 1], end = sm.hist[b];
    int rank = 0;
    for (int y = begin; y < end; ++y) rank += sm.keys[y] > key ? 1 : 0;
    mine[u] = key;
    place[u] = begin + rank;
  }
  __syncthreads();
#pragma unroll
  for (int u = 0; u < kPerThread; ++u)
    if (place[u] >= 0) sm.keys[place[u]] = mine[u];
  __syncthreads();
  return true;
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
  const bool probe = a.probe != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  if (probe) a.probe[0] = clock64();
  int row = slot, position;
  if (a.rows != nullptr) {
    const TopkRow r = a.rows[slot];
    row = r.row;
    position = a.positions[r.pos_offset];
  } else {
    position = a.positions[slot];
  }
  const int visible = VisibleEntries(position, a.reach, a.per), k = a.topk;
  std::int32_t* out = a.out + static_cast<std::int64_t>(row) * k;
  if (visible <= k) {  // every key, in position order
    for (int j = threadIdx.x; j < k; j += kThreads) out[j] = j < visible ? j : -1;
    return;
  }
  const float* s = a.scores + static_cast<std::int64_t>(slot) * a.stride;
  if (threadIdx.x == 0) sm.count = 0;
  std::uint32_t lowest = 0;  // gather every score at or above this (radix passes)
  bool ties = false, linear = false;
  std::uint32_t tie_bits = 0;
  int need = k, linear_bin = 0;
  float lo_f = 0.0f, inv_f = 0.0f;
  if (visible > kMaxTopk) {
    const std::uint32_t hi = a.minmax[2 * slot], lo = ~a.minmax[2 * slot + 1];
    // First a histogram over [lo, hi] in equal steps: the highest scores lie in the sparse upper
    // bins of a typical row, so one pass usually leaves at most kMaxTopk at or above the k-th's
    // bin (the bits' radix passes would start on exponent bits, where a row's scores crowd a few
    // bins and the shared-memory atomics serialize).
    const float hi_f = FromOrderedBits(hi);
    lo_f = FromOrderedBits(lo);
    const float span = hi_f - lo_f;
    if (span > 0.0f && span < INFINITY) {
      inv_f = static_cast<float>(kBins) / span;
      for (int i = threadIdx.x; i < kBins; i += kThreads) sm.hist[i] = 0;
      __syncthreads();
      ForEachScore(s, visible, [&](float v, int) { atomicAdd(&sm.hist[LinearBin(v, lo_f, inv_f)], 1); });
      __syncthreads();
      FindDigit(sm, kBins, k);
      linear = sm.above + sm.in_digit <= kMaxTopk;
      linear_bin = sm.digit;
    }
  }
  if (probe) a.probe[1] = clock64();
  int passes = 0;
  if (visible > kMaxTopk && !linear) {  // radix passes over the scores' bits
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
      ForEachScore(s, visible, [&](float v, int) {
        const std::uint32_t u = OrderedBits(v);
        if ((u & mask) == prefix) atomicAdd(&sm.hist[(u >> shift) & digit_mask], 1);
      });
      __syncthreads();
      FindDigit(sm, 1 << bits, need);
      ++passes;
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
  if (probe) a.probe[2] = clock64();
  __syncthreads();
  bool sorted = false;
  if (linear) sorted = BucketSort(sm, s, visible, lo_f, inv_f, linear_bin);
  if (sorted) {
    // sm.keys[0, topk) are the selection already.
  } else if (linear) {
    Gather(sm, s, visible, [&](float v, std::uint32_t) { return LinearBin(v, lo_f, inv_f) >= linear_bin; });
  } else if (!ties) {
    Gather(sm, s, visible, [&](float, std::uint32_t u) { return u >= lowest; });
  } else {
    if (tie_bits != 0xFFFFFFFFu) Gather(sm, s, visible, [&](float, std::uint32_t u) { return u > tie_bits; });
    __syncthreads();
    GatherTies(sm, s, visible, tie_bits, need);
  }
  __syncthreads();
  if (probe) a.probe[3] = clock64();
  const int gathered = sm.count;
  if (!sorted) SortDescending(sm.keys, gathered);
  if (probe) a.probe[4] = clock64();
  for (int j = threadIdx.x; j < k; j += kThreads)
    out[j] = static_cast<std::int32_t>(0xFFFFFFFFu - static_cast<std::uint32_t>(sm.keys[j]));
  if (probe) {
    a.probe[5] = clock64();
    a.probe[6] = gathered;
    a.probe[7] = passes;
  }
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
