// DeepSeek-V4 on CUDA (cuda_v4.h): the mHC residual streams, V4's rope, the grouped output
// projection and the sqrt-softplus / hash routing. fp32 arithmetic in the CPU reference's order
// where a value is one thread's (the Sinkhorn mixing, the routing weights), block sums where it
// is a reduction (the mixes' dot products).
#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_v4.h"
#include "kernels/cuda/mla_host.h"
#include "kernels/cuda/route_topk.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxMult = 4;  // hc_mult the mixing keeps in registers (V4: 4)
constexpr int kMaxMixes = (2 + kMaxMult) * kMaxMult;
constexpr int kSums = kMaxMixes + 1;  // a column chunk's sum of squares, then its mixes' dot products
static_assert(kMaxMult * kMaxMult <= 32, "the Sinkhorn normalisation keeps an element a lane of one warp");
// Columns of the flattened streams one warp of the mixing's first pass sums for a token: fixed,
// so a token's sums are the same whatever the batch (16 chunks a token at V4-Flash's 4 x 4096
// streams, eight float4 loads a lane in flight).
constexpr std::int64_t kMixChunk = 1024;
// Tokens one block of the first pass sums, a warp each in turn, sharing its columns of fn.
constexpr int kMixTokens = 32;
constexpr int kMaxRouteTopK = 32;

__device__ __forceinline__ float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// comb [M, M] made doubly stochastic, as the CPU reference does it: softmax over each row plus
// eps, columns normalised, then iters - 1 rounds of rows and columns (denominators + eps). Lane
// j·M + k of the warp holds c[j][k] (lanes past M·M hold nothing anyone reads) and gathers its
// row's or column's values by shuffles to add them in the CPU's order, so the M² elements are
// normalised at once: one thread doing it all spent ~30 µs a call on the divisions' latency.
template <int M>
__device__ __forceinline__ float SinkhornLane(float v, int iters, float eps) {
  const int lane = threadIdx.x & 31, j = lane / M, k = lane % M;
  auto in_row = [&](float x, int kk) { return __shfl_sync(0xffffffffu, x, j * M + kk); };
  auto in_column = [&](float x, int jj) { return __shfl_sync(0xffffffffu, x, jj * M + k); };
  auto rows = [&] {
    float sum = 0.0f;
#pragma unroll
    for (int kk = 0; kk < M; ++kk) sum += in_row(v, kk);
    v /= sum + eps;
  };
  auto columns = [&] {
    float sum = 0.0f;
#pragma unroll
    for (int jj = 0; jj < M; ++jj) sum += in_column(v, jj);
    v /= sum + eps;
  };
  float top = in_row(v, 0);
#pragma unroll
  for (int kk = 1; kk < M; ++kk) top = fmaxf(top, in_row(v, kk));
  v = expf(v - top);
  float sum = 0.0f;
#pragma unroll
  for (int kk = 0; kk < M; ++kk) sum += in_row(v, kk);
  v = v / sum + eps;
  columns();
  for (int it = 1; it < iters; ++it) {
    rows();
    columns();
  }
  return v;
}

// The mixing's first pass over columns [s·kMixChunk, +kMixChunk) of each token's flattened streams
// x: sums[0] = Σ x², sums[1 + i] = Σ fn[i, c] · x[c]. Since fn · (x / rms) = (fn · x) / rms, the
// RMS can wait for the second pass. Block (group of kMixTokens tokens, chunk s): the chunk's
// columns of fn are copied to shared memory once (96 KB; a thread's float4 column of every row in
// flight at once) and shared by the group's tokens (a block per token read fn's 1.5 MB from L2
// once per token: 25 GB of L2 reads for a 16K-token prefill). A warp owns a token's chunk in turn
// (lane l reads float4 columns 4·(l + 32·j), all eight loads in flight, then a shuffle tree), so
// a token's sums are the same whatever the batch.
__global__ void __launch_bounds__(kThreads) HyperSumsKernel(const float* streams, const float* fn, std::int64_t n,
                                                            std::int64_t width, int mixes, float* sums) {
  extern __shared__ float4 fn_chunk[];  // [mixes][kMixChunk / 4]
  constexpr int kRow4 = kMixChunk / 4, kLaneChunks = kRow4 / 32;
  static_assert(kRow4 == kThreads, "a thread copies one float4 column of every row");
  const std::int64_t c0 = blockIdx.y * kMixChunk;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  {
    const std::int64_t c = c0 + 4 * threadIdx.x;
    float4 f[kMaxMixes];
#pragma unroll
    for (int i = 0; i < kMaxMixes; ++i)
      f[i] = i < mixes && c < width ? __ldg(reinterpret_cast<const float4*>(fn + i * width + c)) : make_float4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < kMaxMixes; ++i)
      if (i < mixes) fn_chunk[i * kRow4 + threadIdx.x] = f[i];
  }
  __syncthreads();
  const std::int64_t t1 = min(n, (blockIdx.x + 1) * static_cast<std::int64_t>(kMixTokens));
  for (std::int64_t t = blockIdx.x * static_cast<std::int64_t>(kMixTokens) + warp; t < t1; t += kThreads / 32) {
    float4 v[kLaneChunks];
#pragma unroll
    for (int j = 0; j < kLaneChunks; ++j) {
      const std::int64_t c = c0 + 4 * (lane + 32 * j);
      v[j] = c < width ? *reinterpret_cast<const float4*>(streams + t * width + c) : make_float4(0, 0, 0, 0);
    }
    float acc[kSums];
    acc[0] = 0.0f;
#pragma unroll
    for (int j = 0; j < kLaneChunks; ++j) acc[0] += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
#pragma unroll
    for (int i = 0; i < kMaxMixes; ++i) {
      acc[1 + i] = 0.0f;
      if (i >= mixes) continue;
#pragma unroll
      for (int j = 0; j < kLaneChunks; ++j) {
        const float4 f = fn_chunk[i * kRow4 + lane + 32 * j];
        acc[1 + i] += f.x * v[j].x + f.y * v[j].y + f.z * v[j].z + f.w * v[j].w;
      }
    }
#pragma unroll
    for (int i = 0; i < kSums; ++i)
      for (int o = 16; o > 0; o >>= 1) acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], o);
    if (lane == 0) {
      float* out = sums + (t * gridDim.y + blockIdx.y) * kSums;
#pragma unroll
      for (int i = 0; i < kSums; ++i)
        if (i <= mixes) out[i] = acc[i];
    }
  }
}

// The second pass, one block per token: the chunks' sums (each warp adds every 8th chunk, then the
// warps' parts in order), r = 1 / rms, mixes = r · (fn · x), then by warp 0 the sublayer's pre
// weights (and, with `post`, its post weights and the Sinkhorn-mixed comb; the head has neither)
// in the CPU's order, then collapsed = Σ_j pre_j · stream_j.
template <int kMult>
__global__ void __launch_bounds__(kThreads) HyperWeightsKernel(const float* streams, const float* sums, int chunks,
                                                               const float* base, const float* scale,
                                                               std::int64_t hidden, int mixes, int iters, float eps,
                                                               float norm_eps, float* collapsed, float* post,
                                                               float* comb) {
  constexpr int kWarps = kThreads / 32;
  __shared__ float pre[kMult];
  __shared__ float total[kSums];
  __shared__ float part[kWarps][kSums];
  const std::int64_t t = blockIdx.x, width = kMult * hidden;
  const float* x = streams + t * width;
  // Lane i of warp w adds sum i of chunks w, w + kWarps, ..., then the warps' parts in warp order:
  // a fixed order, and each lane's loads independent of one another.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane <= mixes) {
    float sum = 0.0f;
#pragma unroll 4
    for (int s = warp; s < chunks; s += kWarps) sum += sums[(t * chunks + s) * kSums + lane];
    part[warp][lane] = sum;
  }
  __syncthreads();
  if (threadIdx.x <= mixes) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += part[w][threadIdx.x];
    total[threadIdx.x] = sum;
  }
  __syncthreads();
  if (warp == 0) {  // mix i = r · (fn_i · x); lanes compute the weights they own
    const float r = 1.0f / sqrtf(total[0] / static_cast<float>(width) + norm_eps);
    auto mix = [&](int i) { return i < mixes ? total[1 + i] * r : 0.0f; };
    if (lane < kMult) pre[lane] = Sigmoid(mix(lane) * scale[0] + base[lane]) + eps;
    if (post != nullptr) {
      if (lane < kMult) post[t * kMult + lane] = 2.0f * Sigmoid(mix(kMult + lane) * scale[1] + base[kMult + lane]);
      const int e = lane < kMult * kMult ? lane : 0;
      const float c = SinkhornLane<kMult>(mix(2 * kMult + e) * scale[2] + base[2 * kMult + e], iters, eps);
      if (lane < kMult * kMult) comb[t * kMult * kMult + lane] = c;
    }
  }
  __syncthreads();
#pragma unroll 4
  for (std::int64_t d = threadIdx.x; d < hidden; d += kThreads) {
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kMult; ++j) sum += pre[j] * x[j * hidden + d];
    collapsed[t * hidden + d] = sum;
  }
}

__global__ void ExpandStreamsKernel(const float* x, float* out, std::int64_t n, int mult, std::int64_t hidden) {
  const std::int64_t total = n * mult * hidden;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / (mult * hidden), d = i % hidden;
    out[i] = x[t * hidden + d];
  }
}

// out[t, k, d] = post[t, k] · y[t, d] + Σ_j comb[t, j, k] · streams[t, j, d]. A thread per (t, d)
// writes every k, so each stream value and y are read once (a thread per output read each stream
// value kMult times and spent its time on 64-bit index divisions); the same sums in the same order.
template <int kMult>
__global__ void HyperPostKernel(const float* y, const float* streams, const float* post, const float* comb,
                                float* out, std::int64_t n, std::int64_t hidden) {
  const std::int64_t total = n * hidden;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t t = i / hidden, d = i - t * hidden;
    const float* x = streams + t * kMult * hidden + d;
    const float* c = comb + t * kMult * kMult;
    float xs[kMult];
#pragma unroll
    for (int j = 0; j < kMult; ++j) xs[j] = x[j * hidden];
    const float yd = y[i];
    float* o = out + t * kMult * hidden + d;
#pragma unroll
    for (int k = 0; k < kMult; ++k) {
      float mixed = 0.0f;
#pragma unroll
      for (int j = 0; j < kMult; ++j) mixed += c[j * kMult + k] * xs[j];
      o[k * hidden] = post[t * kMult + k] * yd + mixed;
    }
  }
}

// One thread per (token, head, pair): interleaved pair (2i, 2i + 1) rotated by ±angle in place.
__global__ void V4RopeKernel(void* x, Elem xe, std::int64_t n, std::int64_t heads, std::int64_t head_dim,
                             std::int64_t offset, std::int64_t half, const std::int32_t* positions,
                             const float* inv_freq, bool inverse) {
  const std::int64_t total = n * heads * half;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t pair = i % half, item = i / half, t = item / heads;
    const float angle = static_cast<float>(positions[t]) * inv_freq[pair];
    const float c = cosf(angle), s = inverse ? -sinf(angle) : sinf(angle);
    const std::int64_t at = item * head_dim + offset + 2 * pair;
    const float a = LoadF(x, at, xe), b = LoadF(x, at + 1, xe);
    StoreF(x, at, xe, a * c - b * s);
    StoreF(x, at + 1, xe, b * c + a * s);
  }
}

// One warp per token: sqrt(softplus) scores (torch's threshold of 20), the top_k of score + bias
// or the token's fixed ids, ascending, weighted by score / Σ scores · scaling. Shared memory:
// scores, biased choices and a taken flag per expert.
__global__ void RouteSqrtSoftplusKernel(const float* logits, const float* bias, const std::int32_t* hash_table,
                                        const std::int32_t* token_ids, int experts, int top_k, float scaling,
                                        std::int32_t* ids, float* weights) {
  const bool hashed = hash_table != nullptr;
  extern __shared__ float smem[];
  float* scores = smem;
  float* choice = smem + experts;
  int* taken = reinterpret_cast<int*>(smem + 2 * experts);
  __shared__ int chosen[kMaxRouteTopK];
  const int lane = threadIdx.x;
  const std::int64_t t = blockIdx.x;
  for (int e = lane; e < experts; e += 32) {
    const float x = logits[t * experts + e];
    const float s = sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    scores[e] = s;
    // A NaN score (a padding row) ranks below every number, so the ids stay in range.
    if (!hashed) choice[e] = isnan(s) ? -INFINITY : s + bias[e];
    taken[e] = 0;
  }
  if (hashed && lane < top_k) chosen[lane] = hash_table[static_cast<std::int64_t>(token_ids[t]) * top_k + lane];
  __syncwarp();
  if (!hashed) WarpTopK(choice, taken, experts, top_k, chosen);
  if (lane == 0) {
    SortAscending(chosen, top_k);
    float sum = 0.0f;
    for (int i = 0; i < top_k; ++i) sum += scores[chosen[i]];
    for (int i = 0; i < top_k; ++i) {
      ids[t * top_k + i] = chosen[i];
      weights[t * top_k + i] = scores[chosen[i]] / (sum + 1e-20f) * scaling;
    }
  }
}

void CheckF32(const Tensor& t, const char* what) {
  FISSION_CHECK(t.dtype == DType::kF32, "DeepSeek-V4's ", what, " on CUDA must be fp32, not ", DTypeName(t.dtype));
}

void CheckStreams(const Tensor& streams, const HyperShape& sh) {
  FISSION_CHECK(streams.rank() == 3 && streams.shape[1] == sh.mult && streams.shape[2] == sh.hidden &&
                    streams.dtype == DType::kF32,
                "hyper-connection streams ", streams.shape.ToString(), " for ", sh.mult, " streams of ", sh.hidden);
  FISSION_CHECK(sh.mult >= 1 && sh.mult <= kMaxMult, "hc_mult ", sh.mult, ": the CUDA mixing takes at most ",
                kMaxMult, " streams");
}

unsigned GridFor(std::int64_t total) { return std::min(Blocks(total, kThreads), 8192u); }

// Both passes of the mixing for n tokens of `mult` streams (post and comb null for the head).
void HyperMix(CudaContext& ctx, const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
              const HyperShape& sh, int mixes, const Tensor& collapsed, float* post, float* comb) {
  const std::int64_t n = streams.shape[0], width = sh.mult * sh.hidden;
  const int chunks = static_cast<int>((width + kMixChunk - 1) / kMixChunk);
  FISSION_CHECK(chunks <= 65535 && width % 4 == 0 && Aligned16(streams.data) && Aligned16(fn.data),
                "mHC streams of ", width, " values (the CUDA mixing reads them as float4: a multiple of 4, aligned)");
  Buffer sums(DType::kF32, Shape{n * chunks, kSums}, ctx.allocator());
  const auto groups = static_cast<unsigned>((n + kMixTokens - 1) / kMixTokens);
  const std::size_t smem = static_cast<std::size_t>(mixes) * kMixChunk * sizeof(float);
  static std::atomic<std::uint64_t> configured{0};  // the attribute is per device
  const std::uint64_t bit = std::uint64_t{1} << (ctx.device() & 63);
  if ((configured.fetch_or(bit) & bit) == 0)
    FISSION_CUDA(cudaFuncSetAttribute(HyperSumsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kMaxMixes * kMixChunk * sizeof(float))));
  HyperSumsKernel<<<dim3(groups, static_cast<unsigned>(chunks)), kThreads, smem, ctx.stream()>>>(
      streams.ptr<float>(), fn.ptr<float>(), n, width, mixes, sums.tensor().ptr<float>());
  FISSION_LAUNCHED();
  auto weights = [&](auto mult) {
    HyperWeightsKernel<decltype(mult)::value><<<static_cast<unsigned>(n), kThreads, 0, ctx.stream()>>>(
        streams.ptr<float>(), sums.tensor().ptr<float>(), chunks, base.ptr<float>(), scale.ptr<float>(), sh.hidden,
        mixes, sh.sinkhorn_iters, sh.eps, sh.norm_eps, collapsed.ptr<float>(), post, comb);
  };
  static_assert(kMaxMult == 4, "one instantiation per stream count");
  switch (sh.mult) {  // CheckStreams: 1 <= mult <= kMaxMult
    case 1: weights(std::integral_constant<int, 1>{}); break;
    case 2: weights(std::integral_constant<int, 2>{}); break;
    case 3: weights(std::integral_constant<int, 3>{}); break;
    default: weights(std::integral_constant<int, 4>{}); break;
  }
  FISSION_LAUNCHED();
}

}  // namespace

void V4ExpandStreams(CudaContext& ctx, const Tensor& x, const Tensor& out) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  FISSION_CHECK(out.rank() == 3 && out.shape[0] == n && out.shape[2] == hidden, "ExpandStreams x",
                x.shape.ToString(), " out", out.shape.ToString());
  CheckF32(x, "hidden state");
  CheckF32(out, "streams");
  if (out.numel() == 0) return;
  ExpandStreamsKernel<<<GridFor(out.numel()), kThreads, 0, ctx.stream()>>>(
      x.ptr<float>(), out.ptr<float>(), n, static_cast<int>(out.shape[1]), hidden);
  FISSION_LAUNCHED();
}

void V4HyperPre(CudaContext& ctx, const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                const HyperShape& sh, const Tensor& collapsed, const Tensor& post, const Tensor& comb) {
  CheckStreams(streams, sh);
  const std::int64_t n = streams.shape[0], m = sh.mult, width = m * sh.hidden, mixes = (2 + m) * m;
  FISSION_CHECK(fn.shape == Shape({mixes, width}) && base.numel() == mixes && scale.numel() == 3,
                "mHC weights fn", fn.shape.ToString(), " base", base.shape.ToString(), " for ", m, " streams");
  for (const Tensor* t : {&fn, &base, &scale, &collapsed, &post, &comb}) CheckF32(*t, "mHC tensors");
  FISSION_CHECK(collapsed.numel() == n * sh.hidden && post.numel() == n * m && comb.numel() == n * m * m,
                "HyperPre outputs collapsed", collapsed.shape.ToString(), " post", post.shape.ToString(), " comb",
                comb.shape.ToString());
  if (n == 0) return;
  HyperMix(ctx, streams, fn, base, scale, sh, static_cast<int>(mixes), collapsed, post.ptr<float>(), comb.ptr<float>());
}

void V4HyperPost(CudaContext& ctx, const Tensor& block_out, const Tensor& streams, const Tensor& post,
                 const Tensor& comb, const Tensor& out) {
  FISSION_CHECK(streams.rank() == 3, "HyperPost streams ", streams.shape.ToString());
  const std::int64_t n = streams.shape[0], m = streams.shape[1], hidden = streams.shape[2];
  FISSION_CHECK(out.shape == streams.shape && out.data != streams.data && block_out.numel() == n * hidden &&
                    post.numel() == n * m && comb.numel() == n * m * m,
                "HyperPost block_out", block_out.shape.ToString(), " streams", streams.shape.ToString(), " out",
                out.shape.ToString(), " (out must not alias streams)");
  for (const Tensor* t : {&block_out, &streams, &post, &comb, &out}) CheckF32(*t, "mHC tensors");
  FISSION_CHECK(m >= 1 && m <= kMaxMult, "hc_mult ", m, ": the CUDA mixing takes at most ", kMaxMult, " streams");
  if (out.numel() == 0) return;
  auto launch = [&](auto mult) {
    HyperPostKernel<decltype(mult)::value><<<GridFor(n * hidden), kThreads, 0, ctx.stream()>>>(
        block_out.ptr<float>(), streams.ptr<float>(), post.ptr<float>(), comb.ptr<float>(), out.ptr<float>(), n,
        hidden);
  };
  switch (m) {
    case 1: launch(std::integral_constant<int, 1>{}); break;
    case 2: launch(std::integral_constant<int, 2>{}); break;
    case 3: launch(std::integral_constant<int, 3>{}); break;
    default: launch(std::integral_constant<int, 4>{}); break;
  }
  FISSION_LAUNCHED();
}

void V4HyperHead(CudaContext& ctx, const Tensor& streams, const Tensor& fn, const Tensor& base, const Tensor& scale,
                 const HyperShape& sh, const Tensor& out) {
  CheckStreams(streams, sh);
  const std::int64_t n = streams.shape[0], m = sh.mult, width = m * sh.hidden;
  FISSION_CHECK(fn.shape == Shape({m, width}) && base.numel() == m && scale.numel() == 1 &&
                    out.numel() == n * sh.hidden,
                "mHC head fn", fn.shape.ToString(), " for ", m, " streams, out", out.shape.ToString());
  for (const Tensor* t : {&fn, &base, &scale, &out}) CheckF32(*t, "mHC head tensors");
  if (n == 0) return;
  HyperMix(ctx, streams, fn, base, scale, sh, static_cast<int>(m), out, nullptr, nullptr);
}

void V4Rope(CudaContext& ctx, const Tensor& x, std::int64_t offset, std::int64_t dim,
            std::span<const std::int32_t> positions, const Tensor& inv_freq, bool inverse) {
  FISSION_CHECK(x.rank() == 3 && offset >= 0 && offset + dim <= x.shape[2] && dim % 2 == 0 &&
                    inv_freq.numel() == dim / 2 && inv_freq.dtype == DType::kF32 &&
                    static_cast<std::int64_t>(positions.size()) == x.shape[0],
                "V4 rope over ", x.shape.ToString(), " dims [", offset, ", ", offset + dim, ") with ", positions.size(),
                " positions");
  const std::int64_t n = x.shape[0], heads = x.shape[1], half = dim / 2;
  if (n == 0 || half == 0) return;
  const DeviceMeta pos = ctx.Upload(positions);
  V4RopeKernel<<<GridFor(n * heads * half), kThreads, 0, ctx.stream()>>>(
      x.data, ElemOf(x), n, heads, x.shape[2], offset, half, pos.ptr<std::int32_t>(), inv_freq.ptr<float>(), inverse);
  FISSION_LAUNCHED();
}

// One strided-batched GEMM, a group per batch entry: out[:, g·r + i] = x[:, g·k : (g+1)·k] · w[g·r + i]ᵀ.
// bf16 weights take bf16 activations (converted first), fp32 weights an fp32 GEMM; the output is fp32.
namespace {

// One token: its groups are the rows of x viewed [groups, k], and group g multiplies row g by its
// weight rows [g·r, (g + 1)·r): the bf16 run GEMV of the routed experts with a run per group, each
// group's weight read once at HBM speed (a strided-batched cuBLASLt GEMM read V4-Flash's 67 MB at
// about a quarter of it). The runs and the weight table depend on the shapes alone.
void OneTokenGroupedLinear(CudaContext& ctx, const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out) {
  const std::int64_t k = x.shape[1] / groups, r = w.shape[0] / groups;
  std::vector<ExpertRun> runs;
  std::vector<const void*> weights;
  for (std::int64_t g = 0; g < groups; ++g) {
    runs.push_back({static_cast<std::int32_t>(g), static_cast<std::int32_t>(g), 1});
    weights.push_back(static_cast<const char*>(w.data) + g * r * k * DTypeBytes(w.dtype, 1));
  }
  const auto count = static_cast<std::int32_t>(groups);
  const DeviceMeta run_list = ctx.UploadConstant(std::span<const ExpertRun>(runs));
  const DeviceMeta run_count = ctx.UploadConstant(std::span<const std::int32_t>(&count, 1));
  const void* const* table = ctx.PointerTable(weights, "the grouped output projection");
  Bf16GemvRuns(ctx, x.View(Shape{groups, k}), run_list.ptr<ExpertRun>(), run_count.ptr<std::int32_t>(), groups, table,
               r, out.View(Shape{groups, r}));
}

}  // namespace

void V4GroupedLinear(CudaContext& ctx, const Tensor& x, const Tensor& w, std::int64_t groups, const Tensor& out) {
  FISSION_CHECK(x.rank() == 2 && w.rank() == 2 && groups > 0 && x.shape[1] % groups == 0 && w.shape[0] % groups == 0,
                "grouped linear x", x.shape.ToString(), " w", w.shape.ToString(), " in ", groups, " groups");
  const std::int64_t n = x.shape[0], k = x.shape[1] / groups, r = w.shape[0] / groups;
  FISSION_CHECK(w.shape[1] == k && out.shape == Shape({n, groups * r}) && out.dtype == DType::kF32 &&
                    (w.dtype == DType::kF32 || w.dtype == DType::kBF16),
                "grouped linear x", x.shape.ToString(), " w", w.shape.ToString(), " (", DTypeName(w.dtype), ") out",
                out.shape.ToString(), " in ", groups, " groups");
  if (n == 0) return;
  if (w.dtype == DType::kF32) CheckF32(x, "grouped projection's input for fp32 weights");
  if (n == 1 && w.dtype == DType::kBF16 && Bf16GemvRunsTakes(k, {&w, 1})) return OneTokenGroupedLinear(ctx, x, w, groups, out);
  Buffer x_holder;
  const Tensor xa = w.dtype == DType::kBF16 ? AsBf16(ctx, x, x_holder) : x;
  const int type = w.dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;
  GemmDesc g;
  g.trans_a = true;
  g.m = r;
  g.n = n;
  g.k = k;
  g.a = w.data;
  g.a_type = type;
  g.lda = k;
  g.stride_a = r * k;
  g.b = xa.data;
  g.b_type = type;
  g.ldb = groups * k;
  g.stride_b = k;
  g.d = out.data;
  g.d_type = CUDA_R_32F;
  g.ldd = groups * r;
  g.stride_d = r;
  g.batch = static_cast<int>(groups);
  FISSION_CHECK(ctx.Gemm(g), "cuBLASLt has no algorithm for the grouped projection ", n, "x", r, "x", k, " in ",
                groups, " groups");
}

void V4RouteSqrtSoftplus(CudaContext& ctx, const Tensor& router_logits, const Tensor& bias, const Tensor& hash_table,
                         std::span<const std::int32_t> token_ids, std::int64_t top_k, float scaling, const Tensor& ids,
                         const Tensor& weights) {
  CheckSqrtSoftplusRouting(router_logits, bias, hash_table, token_ids, top_k);
  const std::int64_t n = router_logits.shape[0], experts = router_logits.shape[1];
  // The table's ids were checked against the experts at load; the step's token ids against the
  // vocabulary before the step.
  const bool hashed = hash_table.data != nullptr;
  FISSION_CHECK(top_k >= 1 && top_k <= kMaxRouteTopK && top_k <= experts, "top_k ", top_k, " of ", experts,
                " experts (the CUDA router picks at most ", kMaxRouteTopK, ")");
  FISSION_CHECK(ids.dtype == DType::kI32 && weights.dtype == DType::kF32 && ids.numel() == n * top_k &&
                    weights.numel() == n * top_k,
                "routing outputs ids", ids.shape.ToString(), " weights", weights.shape.ToString());
  CheckF32(router_logits, "router logits");
  if (!hashed) CheckF32(bias, "router bias");
  for (std::int32_t token : token_ids)
    FISSION_CHECK(token >= 0 && token < hash_table.shape[0], "token id ", token, " outside the hash table");
  if (n == 0) return;
  const DeviceMeta tokens = hashed ? ctx.Upload(token_ids) : DeviceMeta();
  const std::size_t smem = static_cast<std::size_t>(experts) * 3 * sizeof(float);
  RouteSqrtSoftplusKernel<<<static_cast<unsigned>(n), 32, smem, ctx.stream()>>>(
      router_logits.ptr<float>(), hashed ? nullptr : bias.ptr<float>(),
      hashed ? hash_table.ptr<std::int32_t>() : nullptr, hashed ? tokens.ptr<std::int32_t>() : nullptr,
      static_cast<int>(experts), static_cast<int>(top_k), scaling, ids.ptr<std::int32_t>(), weights.ptr<float>());
  FISSION_LAUNCHED();
}

}  // namespace fission::kernels::cuda
