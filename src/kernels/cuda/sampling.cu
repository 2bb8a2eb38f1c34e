// Backend::Sample on the device: one block per row, the logits never leave the device, only the
// chosen tokens and their logprobs come back.
//
// The arithmetic follows the host reference (kernels/cpu/cpu_sampling.cc) step by step: the same
// float penalties and temperature (IEEE division, no contraction), fp64 probabilities
// exp(x - max), the same seeded uniform. Candidates are ordered by the composite key
// (value, then lower id) the reference's sort uses; instead of sorting, thresholds on that key are
// found by a radix select (top_k, by count) and by bisection with block-wide sums (top_p and the
// draw, by probability mass).
// Candidate sets of at most kGatherCap tokens (top_k up to it, or a nucleus inside the top
// kGatherCap) are first gathered into shared memory, so those bisections cost little. Sums run in
// a fixed tree order, so the results are deterministic; they differ from the reference's
// sequential sums in the last bits, which changes a token only when a draw falls within that
// rounding of a boundary.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/sampling.h"

namespace fission::kernels::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kGatherCap = 2048;
constexpr unsigned kFull = 0xffffffffu;
using Key = unsigned long long;

// SamplingRow as the kernel reads it; the id lists are ranges of one flat array.
struct RowParams {
  std::int64_t row;
  double temperature, top_p, min_p, repetition_penalty, frequency_penalty, presence_penalty;
  std::uint64_t seed, counter;
  std::int32_t top_k, top_logprobs, forced_token, want_logprob;
  std::int32_t seen_begin, seen_end, output_begin, output_end, masked_begin, masked_end;
  std::int32_t allowed_begin, allowed_end;  // the allowed-token bitmask's words (as int32), or empty
};

struct RowResult {
  std::int32_t token;
  float logprob;
  std::int32_t top_ids[kMaxSampleTopLogprobs];
  float top_logprobs[kMaxSampleTopLogprobs];
};

// Larger key = more likely: value descending, then id ascending (the reference's order).
// -0 and +0 compare equal there, so both map to +0.
__device__ __forceinline__ Key CompositeKey(float v, int id) {
  unsigned bits = v == 0.0f ? 0u : __float_as_uint(v);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  return (static_cast<Key>(bits) << 32) | (0xffffffffu - static_cast<unsigned>(id));
}
__device__ __forceinline__ int IdOf(Key k) { return static_cast<int>(0xffffffffu - static_cast<unsigned>(k)); }

// What one pass over the candidates yields: how many, their mass, and the least likely one.
struct PassResult {
  long long count;
  double sum;
  Key min_key;
  double min_w;
};

__device__ __forceinline__ PassResult Combine(PassResult a, const PassResult& b) {
  a.count += b.count;
  a.sum += b.sum;
  if (b.min_key < a.min_key) {
    a.min_key = b.min_key;
    a.min_w = b.min_w;
  }
  return a;
}

struct SharedState {
  PassResult pass[kWarps];
  double scan[kThreads];
  Key max_key[kWarps];
  int ints[kWarps];
  Key keys[kGatherCap];
  double weights[kGatherCap];
  int hist[257];  // radix digits, and a dummy bin for elements outside the prefix
  int chosen_bin;
  long long above;
  int token;
};

// Every thread gets the block's combined result; the combination order is fixed.
__device__ PassResult ReducePass(PassResult v, SharedState& sh) {
  for (int o = 16; o > 0; o >>= 1) {
    PassResult other;
    other.count = __shfl_xor_sync(kFull, v.count, o);
    other.sum = __shfl_xor_sync(kFull, v.sum, o);
    other.min_key = __shfl_xor_sync(kFull, v.min_key, o);
    other.min_w = __shfl_xor_sync(kFull, v.min_w, o);
    v = (threadIdx.x & o) ? Combine(other, v) : Combine(v, other);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.pass[threadIdx.x >> 5] = v;
  __syncthreads();
  PassResult r = sh.pass[0];
  for (int w = 1; w < kWarps; ++w) r = Combine(r, sh.pass[w]);
  return r;
}

__device__ Key ReduceMaxKey(Key v, SharedState& sh) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.max_key[threadIdx.x >> 5] = v;
  __syncthreads();
  Key r = sh.max_key[0];
  for (int w = 1; w < kWarps; ++w) r = max(r, sh.max_key[w]);
  return r;
}

__device__ float ReduceMaxFloat(float v, SharedState& sh) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.scan[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = static_cast<float>(sh.scan[0]);
  for (int w = 1; w < kWarps; ++w) r = fmaxf(r, static_cast<float>(sh.scan[w]));
  return r;
}

// Inclusive prefix sum over threads (thread order); leaves it in sh.scan and returns this thread's.
__device__ double InclusiveScan(double v, SharedState& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    const double up = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += up;
  }
  __syncthreads();
  if (lane == 31) sh.scan[warp] = v;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += sh.scan[w];
  __syncthreads();
  sh.scan[threadIdx.x] = before + v;
  __syncthreads();
  return sh.scan[threadIdx.x];
}

// The candidates a bisection runs over: the whole row in global memory, or a gathered set.
struct RowSource {
  const float* x;
  const double* pr;
  int n;
  __device__ Key key(int i) const { return CompositeKey(x[i], i); }
  __device__ double weight(int i) const { return pr[i]; }
};
struct GatheredSource {
  const Key* keys;
  const double* w;
  int n;
  __device__ Key key(int i) const { return keys[i]; }
  __device__ double weight(int i) const { return w[i]; }
};

// Over the elements with key >= max(lower, from) and weight >= thr.
template <typename Source>
__device__ PassResult Pass(const Source& src, Key lower, double thr, Key from, bool weights, SharedState& sh) {
  PassResult r{0, 0.0, ~0ull, 0.0};
  from = max(from, lower);
  for (int i = threadIdx.x; i < src.n; i += kThreads) {
    const Key k = src.key(i);
    if (k < from) continue;
    const double w = weights ? src.weight(i) : 0.0;
    if (w < thr) continue;
    ++r.count;
    r.sum += w;
    if (k < r.min_key) {
      r.min_key = k;
      r.min_w = w;
    }
  }
  return ReducePass(r, sh);
}

// The `k` most likely elements at or above `lower`: a key T with exactly those at or above it.
// A byte of the key per pass (at most 8 passes, usually 2-3): a histogram of the next byte among the elements matching the bytes chosen so far, then the bin
// holding the k-th element. Lanes with the same bin add once (warp-aggregated shared atomics),
// since most of a row shares the top byte.
__device__ Key SelectCountRadix(const RowSource& row, Key lower, long long k, SharedState& sh) {
  Key prefix = 0, mask = 0;
  long long need = k;
  for (int shift = 56; shift >= 0; shift -= 8) {
    __syncthreads();  // the previous byte's histogram has been read
    for (int b = threadIdx.x; b < 257; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int base = 0; base < row.n; base += kThreads) {  // the same trip count for every lane
      const int i = base + static_cast<int>(threadIdx.x);
      int digit = 256;
      if (i < row.n) {
        const Key key = row.key(i);
        if (key >= lower && (key & mask) == prefix) digit = static_cast<int>((key >> shift) & 255);
      }
      const unsigned peers = __match_any_sync(kFull, digit);
      if (digit < 256 && static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&sh.hist[digit], __popc(peers));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      long long above = 0;
      int b = 255;
      for (; b > 0 && above + sh.hist[b] < need; --b) above += sh.hist[b];
      sh.chosen_bin = b;
      sh.above = above;
    }
    __syncthreads();
    const int b = sh.chosen_bin;
    need -= sh.above;
    prefix |= static_cast<Key>(b) << shift;
    mask |= 255ull << shift;
    if (sh.hist[b] == need) break;  // the whole bin is taken: the bytes below do not matter
  }
  return max(prefix, lower);
}

// Walking the candidates (key >= lower, weight >= thr) from the most likely, the first whose
// cumulative mass reaches `target` (strict: exceeds it). Returns its key, or 0 if none does.
template <typename Source>
__device__ Key SelectMass(const Source& src, Key lower, double thr, double target, bool strict, SharedState& sh) {
  auto reaches = [&](double w) { return strict ? w > target : w >= target; };
  PassResult r = Pass(src, lower, thr, 0, true, sh);
  if (r.count == 0 || !reaches(r.sum)) return 0;
  Key t = 0, best = r.min_key;
  if (!reaches(r.sum - r.min_w)) return best;
  for (int bit = 63; bit >= 0; --bit) {
    const Key cand = t | (1ull << bit);
    r = Pass(src, lower, thr, cand, true, sh);
    if (r.count > 0 && reaches(r.sum)) {
      t = cand;
      best = r.min_key;
      if (!reaches(r.sum - r.min_w)) break;  // without its least likely element it falls short
    }
  }
  return best;
}

// Copies the elements with key >= lower (at most kGatherCap of them) into shared memory, in id order.
// Without `weights` only the keys are copied (rows that have no probabilities).
__device__ GatheredSource Gather(const RowSource& row, Key lower, bool weights, SharedState& sh) {
  const int chunk = (row.n + kThreads - 1) / kThreads;
  const int begin = min(row.n, static_cast<int>(threadIdx.x) * chunk), end = min(row.n, begin + chunk);
  int mine = 0;
  for (int i = begin; i < end; ++i) mine += row.key(i) >= lower;
  const double inclusive = InclusiveScan(static_cast<double>(mine), sh);
  const int total = static_cast<int>(sh.scan[kThreads - 1]);
  int slot = static_cast<int>(inclusive) - mine;
  for (int i = begin; i < end; ++i) {
    const Key k = row.key(i);
    if (k < lower || slot >= kGatherCap) continue;  // the caller guarantees room; never write past it
    sh.keys[slot] = k;
    sh.weights[slot] = weights ? row.weight(i) : 0.0;
    ++slot;
  }
  __syncthreads();
  return GatheredSource{sh.keys, sh.weights, min(total, kGatherCap)};
}

// No top_k and no top_p: the reference walks the candidates (weight >= thr) in id order.
__device__ int DrawInIdOrder(const RowSource& row, double thr, double uniform, SharedState& sh) {
  const int chunk = (row.n + kThreads - 1) / kThreads;
  const int begin = min(row.n, static_cast<int>(threadIdx.x) * chunk), end = min(row.n, begin + chunk);
  double mine = 0.0;
  int last = -1;  // the chunk's last candidate
  for (int i = begin; i < end; ++i) {
    const double w = row.pr[i];
    if (w >= thr) {
      mine += w;
      last = i;
    }
  }
  const double inclusive = InclusiveScan(mine, sh);
  const double exclusive = threadIdx.x > 0 ? sh.scan[threadIdx.x - 1] : 0.0;
  const double u = uniform * sh.scan[kThreads - 1];
  if (threadIdx.x == 0) sh.token = -1;
  __syncthreads();
  if (exclusive <= u && u < inclusive) {
    double cum = exclusive;
    int token = -1, last_positive = last;  // rounding may leave the walk short of u
    for (int i = begin; i < end && token < 0; ++i) {
      const double w = row.pr[i];
      if (w < thr) continue;
      cum += w;
      if (w > 0.0) last_positive = i;
      if (cum > u && w > 0.0) token = i;
    }
    if (token < 0) token = last_positive;
    sh.token = token;
  }
  __syncthreads();
  const int token = sh.token;
  if (token >= 0) return token;
  // u at or past the total: the reference takes the last candidate.
  int v = last;
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(kFull, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.ints[threadIdx.x >> 5] = v;
  __syncthreads();
  int r = sh.ints[0];
  for (int w = 1; w < kWarps; ++w) r = max(r, sh.ints[w]);
  return r;
}

// top_k, then top_p, then min_p over candidates ordered by key; one draw walking that order.
template <typename Source>
__device__ int DrawSorted(const Source& src, Key lower, double total, const RowParams& p, SharedState& sh) {
  if (p.top_p < 1.0) {
    const Key nucleus_end = SelectMass(src, lower, 0.0, p.top_p * total, false, sh);
    if (nucleus_end != 0) lower = nucleus_end;
  }
  // The most likely candidate has probability exp(0) = 1, so min_p's threshold is min_p itself.
  const double thr = p.min_p > 0.0 ? p.min_p : 0.0;
  const PassResult all = Pass(src, lower, thr, 0, true, sh);
  const double u = UniformFromSeed(p.seed, p.counter) * all.sum;
  const Key chosen = SelectMass(src, lower, thr, u, true, sh);
  return IdOf(chosen != 0 ? chosen : all.min_key);
}

__device__ int Draw(const RowSource& row, const RowParams& p, SharedState& sh) {
  const bool has_k = p.top_k > 0 && p.top_k < row.n;
  if (!has_k && p.top_p >= 1.0)
    return DrawInIdOrder(row, p.min_p > 0.0 ? p.min_p : 0.0, UniformFromSeed(p.seed, p.counter), sh);
  Key lower = 0;
  if (has_k) lower = SelectCountRadix(row, 0, p.top_k, sh);
  const long long count = has_k ? p.top_k : row.n;
  if (count <= kGatherCap) {
    const GatheredSource g = Gather(row, lower, true, sh);
    return DrawSorted(g, 0, Pass(g, 0, 0.0, 0, true, sh).sum, p, sh);
  }
  const double total = Pass(row, lower, 0.0, 0, true, sh).sum;
  if (p.top_p < 1.0) {
    // A nucleus inside the kGatherCap most likely candidates is found among them alone.
    const Key top = SelectCountRadix(row, lower, kGatherCap, sh);
    if (Pass(row, top, 0.0, 0, true, sh).sum >= p.top_p * total) {
      const GatheredSource g = Gather(row, top, true, sh);
      return DrawSorted(g, 0, total, p, sh);
    }
  }
  return DrawSorted(row, lower, total, p, sh);
}

// Penalties and masks on the row's copy, in the reference's order (each kind a separate phase,
// since one token may be in several lists).
__device__ void ApplyPenalties(float* x, int vocab, const RowParams& p, const std::int32_t* ids) {
  if (p.repetition_penalty != 1.0) {
    const float rp = static_cast<float>(p.repetition_penalty);
    for (int j = p.seen_begin + threadIdx.x; j < p.seen_end; j += kThreads) {
      const float v = x[ids[j]];
      x[ids[j]] = v > 0.0f ? __fdiv_rn(v, rp) : __fmul_rn(v, rp);
    }
  }
  __syncthreads();
  if (p.frequency_penalty != 0.0 || p.presence_penalty != 0.0) {
    const int count_offset = p.output_end - p.output_begin;
    for (int j = p.output_begin + threadIdx.x; j < p.output_end; j += kThreads) {
      const int count = ids[j + count_offset];
      const double penalty =
          __dadd_rn(__dmul_rn(p.frequency_penalty, static_cast<double>(count)), count > 0 ? p.presence_penalty : 0.0);
      x[ids[j]] = __fsub_rn(x[ids[j]], static_cast<float>(penalty));
    }
  }
  __syncthreads();
  for (int j = p.masked_begin + threadIdx.x; j < p.masked_end; j += kThreads) x[ids[j]] = -INFINITY;
  __syncthreads();
  if (p.allowed_end > p.allowed_begin) {
    const std::uint32_t* allowed = reinterpret_cast<const std::uint32_t*>(ids + p.allowed_begin);
    for (int i = threadIdx.x; i < vocab; i += kThreads)
      if (!TokenAllowed(allowed, i)) x[i] = -INFINITY;
  }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) SampleKernel(const float* __restrict__ logits, int vocab,
                                                         const RowParams* __restrict__ params,
                                                         const std::int32_t* __restrict__ ids, float* x_all,
                                                         double* pr_all, RowResult* results) {
  __shared__ SharedState sh;
  const RowParams p = params[blockIdx.x];
  float* x = x_all + static_cast<std::int64_t>(blockIdx.x) * vocab;
  double* pr = pr_all + static_cast<std::int64_t>(blockIdx.x) * vocab;
  const float* in = logits + p.row * vocab;
  for (int i = threadIdx.x; i < vocab; i += kThreads) x[i] = in[i];
  __syncthreads();
  ApplyPenalties(x, vocab, p, ids);

  const bool greedy = p.temperature == 0.0;
  const bool sampled = !greedy && p.forced_token < 0;
  const float temperature = static_cast<float>(p.temperature);
  float row_max = -INFINITY;
  Key best = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    float v = x[i];
    if (!greedy) x[i] = v = __fdiv_rn(v, temperature);
    row_max = fmaxf(row_max, v);
    best = max(best, CompositeKey(v, i));
  }
  row_max = ReduceMaxFloat(row_max, sh);
  best = ReduceMaxKey(best, sh);

  double lse = row_max;
  if (sampled || p.want_logprob) {
    double sum = 0.0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const double e = exp(static_cast<double>(x[i]) - static_cast<double>(row_max));
      if (sampled) pr[i] = e;
      sum += e;
    }
    sum = ReducePass(PassResult{0, sum, ~0ull, 0.0}, sh).sum;
    if (isfinite(row_max)) lse = static_cast<double>(row_max) + log(sum);
  }

  int token = p.forced_token;
  if (token < 0) token = greedy ? IdOf(best) : Draw(RowSource{x, pr, vocab}, p, sh);

  RowResult* out = results + blockIdx.x;
  if (threadIdx.x == 0) {
    out->token = token;
    out->logprob = p.want_logprob ? static_cast<float>(static_cast<double>(x[token]) - lse) : 0.0f;
  }
  // The alternatives: select the `wanted` largest keys, gather them, sort that handful.
  const int wanted = p.want_logprob ? min(p.top_logprobs, vocab) : 0;
  if (wanted > 0) {
    const RowSource row{x, pr, vocab};
    const GatheredSource top = Gather(row, SelectCountRadix(row, 0, wanted, sh), false, sh);
    if (threadIdx.x == 0) {
      Key* keys = sh.keys;
      for (int a = 1; a < top.n; ++a)  // insertion sort, most likely first
        for (int b = a; b > 0 && keys[b] > keys[b - 1]; --b) {
          const Key t = keys[b];
          keys[b] = keys[b - 1];
          keys[b - 1] = t;
        }
      for (int j = 0; j < top.n; ++j) {
        const int id = IdOf(keys[j]);
        out->top_ids[j] = id;
        out->top_logprobs[j] = static_cast<float>(static_cast<double>(x[id]) - lse);
      }
    }
  }
}

}  // namespace

void Sample(CudaContext& ctx, const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out) {
  FISSION_CHECK(logits.dtype == DType::kF32 && logits.rank() == 2, "Sample needs fp32 logits [n, vocab], got ",
                DTypeName(logits.dtype), " ", logits.shape.ToString());
  FISSION_CHECK(rows.size() == out.size());
  if (rows.empty()) return;
  const std::int64_t n = static_cast<std::int64_t>(rows.size()), vocab = logits.dim(1);
  FISSION_CHECK(vocab > 0 && vocab < (1ll << 31));
  std::vector<RowParams> params(n);
  std::vector<std::int32_t> ids;
  auto append = [&](std::span<const std::int32_t> list, const char* what) {
    for (std::int32_t t : list) FISSION_CHECK(t >= 0 && t < vocab, what, " id ", t, " outside the vocabulary ", vocab);
    ids.insert(ids.end(), list.begin(), list.end());
  };
  for (std::int64_t i = 0; i < n; ++i) {
    const SamplingRow& r = rows[i];
    FISSION_CHECK(r.row >= 0 && r.row < logits.dim(0), "sampling row ", r.row, " of ", logits.dim(0));
    FISSION_CHECK(r.forced_token < vocab && r.output_ids.size() == r.output_counts.size());
    FISSION_CHECK(r.top_logprobs >= 0 && r.top_logprobs <= kMaxSampleTopLogprobs);
    RowParams& p = params[i];
    p.row = r.row;
    p.temperature = r.temperature;
    p.top_p = r.top_p;
    p.min_p = r.min_p;
    p.repetition_penalty = r.repetition_penalty;
    p.frequency_penalty = r.frequency_penalty;
    p.presence_penalty = r.presence_penalty;
    p.seed = r.seed;
    p.counter = r.counter;
    p.top_k = r.top_k;
    p.top_logprobs = r.top_logprobs;
    p.forced_token = r.forced_token;
    p.want_logprob = r.want_logprob;
    p.seen_begin = static_cast<std::int32_t>(ids.size());
    append(r.seen_tokens, "seen token");
    p.seen_end = p.output_begin = static_cast<std::int32_t>(ids.size());
    append(r.output_ids, "output token");
    p.output_end = static_cast<std::int32_t>(ids.size());
    ids.insert(ids.end(), r.output_counts.begin(), r.output_counts.end());  // read at output range + length
    p.masked_begin = static_cast<std::int32_t>(ids.size());
    append(r.masked_ids, "masked token");
    p.masked_end = static_cast<std::int32_t>(ids.size());
    FISSION_CHECK(r.allowed_tokens.empty() || static_cast<std::int64_t>(r.allowed_tokens.size()) == AllowedWords(vocab),
                  "allowed-token mask of ", r.allowed_tokens.size(), " words for a vocabulary of ", vocab);
    p.allowed_begin = static_cast<std::int32_t>(ids.size());
    for (std::uint32_t word : r.allowed_tokens) ids.push_back(static_cast<std::int32_t>(word));  // the same bits
    p.allowed_end = static_cast<std::int32_t>(ids.size());
  }
  DeviceMeta d_params = ctx.Upload(std::span<const RowParams>(params));
  DeviceMeta d_ids = ctx.Upload(std::span<const std::int32_t>(ids));
  Buffer x(DType::kF32, Shape{n, vocab}, ctx.allocator());
  Buffer pr(DType::kF64, Shape{n, vocab}, ctx.allocator());
  Buffer results(DType::kU8, Shape{n * static_cast<std::int64_t>(sizeof(RowResult))}, ctx.allocator());
  // All ones (token -1, NaN logprobs) until written, so a result the kernel misses cannot pass.
  FISSION_CUDA(cudaMemsetAsync(results.tensor().data, 0xff, results.tensor().bytes(), ctx.stream()));
  SampleKernel<<<static_cast<unsigned>(n), kThreads, 0, ctx.stream()>>>(
      static_cast<const float*>(logits.data), static_cast<int>(vocab), d_params.ptr<RowParams>(),
      d_ids.ptr<std::int32_t>(), x.ptr<float>(), pr.ptr<double>(), results.ptr<RowResult>());
  FISSION_LAUNCHED();
  std::vector<RowResult> host(n);
  ctx.DownloadBytes(host.data(), results.tensor().data, host.size() * sizeof(RowResult));
  for (std::int64_t i = 0; i < n; ++i) {
    SampledToken& s = out[i];
    s.token = host[i].token;
    s.logprob = host[i].logprob;
    const int wanted = rows[i].want_logprob ? static_cast<int>(std::min<std::int64_t>(rows[i].top_logprobs, vocab)) : 0;
    s.top_ids.assign(host[i].top_ids, host[i].top_ids + wanted);
    s.top_logprobs.assign(host[i].top_logprobs, host[i].top_logprobs + wanted);
  }
}

}  // namespace fission::kernels::cuda
