// DeepSeekMoE on the GPU: routing (sigmoid, bias for selection, group-limited top-k) and the routed
// experts (token permutation by expert, one GEMM per active expert over its contiguous rows,
// SiLU-and-multiply over all rows at once, weighted un-permutation in a fixed k order). Decode-sized
// calls (kDeviceRoutedTokens) of bf16 experts plan on the device and run every expert on the bf16
// run GEMV, so the step can be captured as a CUDA graph, as the FP8 experts' decode path does;
// larger calls (and fp32 experts) read the per-expert counts back to plan one GEMM per expert.
// (A grouped bf16 GEMM over every expert, one launch a product, was measured slower than these
// cuBLASLt GEMMs at V4-Flash's prefill shapes: docs/benchmarks.md, 2026-12-04 late.)
#include <algorithm>
#include <cub/block/block_scan.cuh>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/route_topk.cuh"

namespace fission::kernels::cuda {
namespace {

constexpr int kMaxGroups = 64;
constexpr int kMaxTopK = 32;

// Group-limited routing: a group's score is the sum of its two best values, the topk_group best
// groups are kept and every expert outside them scores 0, as the reference does. All 32 lanes.
__device__ void SelectGroups(float* masked, int experts, int n_group, int topk_group, float* group_score,
                             int* group_chosen) {
  const int lane = threadIdx.x & 31;
  const int per_group = experts / n_group;
  for (int g = lane; g < n_group; g += 32) {
    float best = -INFINITY, second = -INFINITY;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
      const float c = masked[e];
      if (c > best) {
        second = best;
        best = c;
      } else if (c > second) {
        second = c;
      }
    }
    group_score[g] = per_group >= 2 ? best + second : best;
    group_chosen[g] = 0;
  }
  __syncwarp();
  if (lane == 0) {
    for (int r = 0; r < topk_group; ++r) {
      int bi = -1;
      float bv = -INFINITY;
      for (int g = 0; g < n_group; ++g)
        if (!group_chosen[g] && (bi < 0 || Better(group_score[g], g, bv, bi))) {
          bv = group_score[g];
          bi = g;
        }
      group_chosen[bi] = 1;
    }
  }
  __syncwarp();
  // Experts outside the chosen groups score 0, as the reference does.
  for (int e = lane; e < experts; e += 32)
    if (!group_chosen[e / per_group]) masked[e] = 0.0f;
}

// One warp per token. Shared memory: scores, choice-or-masked values, and a taken flag per expert.
__global__ void MoeRouteKernel(const void* logits, Elem le, const void* bias, Elem be, int experts, int n_group,
                               int topk_group, int top_k, int shared, bool norm, float scaling, std::int32_t* ids,
                               float* weights) {
  extern __shared__ float smem[];
  float* scores = smem;
  float* masked = smem + experts;
  int* taken = reinterpret_cast<int*>(smem + 2 * experts);
  __shared__ float group_score[kMaxGroups];
  __shared__ int group_chosen[kMaxGroups];
  __shared__ int chosen[kMaxTopK];
  const int lane = threadIdx.x;
  const std::int64_t t = blockIdx.x;
  for (int e = lane; e < experts; e += 32) {
    const float s = 1.0f / (1.0f + expf(-LoadF(logits, t * experts + e, le)));
    scores[e] = s;
    // The correction bias steers selection only. A NaN score (a padding row of a captured decode
    // step reading uninitialised cache) ranks below every number, so the ids stay in range.
    masked[e] = isnan(s) ? -INFINITY : s + LoadF(bias, e, be);
    taken[e] = 0;
  }
  __syncwarp();
  // One group (Moonlight's and GLM's routers) keeps every expert: no group scores to compute.
  if (n_group > 1) SelectGroups(masked, experts, n_group, topk_group, group_score, group_chosen);
  __syncwarp();
  WarpTopK(masked, taken, experts, top_k, chosen);
  if (lane == 0) {
    SortAscending(chosen, top_k);
    float sum = 0.0f;
    for (int i = 0; i < top_k; ++i) sum += scores[chosen[i]];
    const std::int64_t row = t * (top_k + shared);
    for (int i = 0; i < top_k; ++i) {
      float w = scores[chosen[i]];
      if (norm) w = w / (sum + 1e-20f);
      ids[row + i] = chosen[i];
      weights[row + i] = w * scaling;
    }
    for (int s = 0; s < shared; ++s) {  // always-on experts after the routed ones
      ids[row + top_k + s] = experts + s;
      weights[row + top_k + s] = 1.0f;
    }
  }
}

__global__ void CountKernel(const std::int32_t* ids, std::int64_t pairs, int experts, int* counts, int* bad) {
  const std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (p >= pairs) return;
  const int e = ids[p];
  if (e < 0 || e >= experts) {
    atomicExch(bad, 1);
    return;
  }
  atomicAdd(&counts[e], 1);
}

// (Token, k) pair p takes the next free row of its expert's block; a pair with an id outside
// [0, experts) gets none (-1).
__device__ __forceinline__ void TakeRow(const std::int32_t* ids, std::int64_t p, int top_k, int experts, int* cursor,
                                        std::int32_t* row_of_pair, std::int32_t* token_of_row) {
  const int e = ids[p];
  if (e < 0 || e >= experts) {
    row_of_pair[p] = -1;
    return;
  }
  const int row = atomicAdd(&cursor[e], 1);
  row_of_pair[p] = row;
  token_of_row[row] = static_cast<std::int32_t>(p / top_k);
}

__global__ void PermuteKernel(const std::int32_t* ids, std::int64_t pairs, int top_k, int experts, int* cursor,
                              std::int32_t* row_of_pair, std::int32_t* token_of_row) {
  const std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (p < pairs) TakeRow(ids, p, top_k, experts, cursor, row_of_pair, token_of_row);
}

// The device-planned permutation in one block of kPlanThreads threads: each expert's pair
// count, the exclusive sums of the rows (the cursors) and of the runs of at most run_rows rows
// (passes of kPlanThreads experts, carrying the sums over), each expert's runs, then each (token,
// k) pair takes the next free row of its expert's block as PermuteKernel does. Shared memory:
// counts and cursors, 2 * experts ints. Rows past the valid ones (a bad id leaves some) gather
// token 0 instead of garbage.
constexpr int kPlanThreads = 1024;
__global__ void __launch_bounds__(kPlanThreads) PlanOnDeviceKernel(const std::int32_t* ids, std::int64_t pairs,
                                                                  int top_k, int experts, int run_rows,
                                                                  ExpertRun* runs, std::int64_t max_runs,
                                                                  std::int32_t* run_count,
                                                                  std::int32_t* row_of_pair,
                                                                  std::int32_t* token_of_row) {
  using Scan = cub::BlockScan<int, kPlanThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ int carry_rows, carry_runs;
  extern __shared__ int plan_smem[];
  int* counts = plan_smem;
  int* cursor = plan_smem + experts;
  for (int e = threadIdx.x; e < experts; e += kPlanThreads) counts[e] = 0;
  for (std::int64_t r = threadIdx.x; r < pairs; r += kPlanThreads) token_of_row[r] = 0;
  if (threadIdx.x == 0) carry_rows = carry_runs = 0;
  __syncthreads();
  for (std::int64_t p = threadIdx.x; p < pairs; p += kPlanThreads) {
    const int e = ids[p];
    if (e >= 0 && e < experts) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  for (int base = 0; base < experts; base += kPlanThreads) {
    const int e = base + static_cast<int>(threadIdx.x);
    const int rows = e < experts ? counts[e] : 0;
    const int n_runs = (rows + run_rows - 1) / run_rows;
    int row0, run0, pass_rows, pass_runs;
    Scan(scan).ExclusiveSum(rows, row0, pass_rows);
    __syncthreads();  // the temporary storage is reused
    Scan(scan).ExclusiveSum(n_runs, run0, pass_runs);
    row0 += carry_rows;
    run0 += carry_runs;
    if (e < experts) {
      cursor[e] = row0;
      for (int r = 0; r < n_runs && run0 + r < max_runs; ++r)
        runs[run0 + r] = ExpertRun{e, row0 + r * run_rows, min(run_rows, rows - r * run_rows)};
    }
    __syncthreads();  // every thread has read the carries
    if (threadIdx.x == 0) {
      carry_rows += pass_rows;
      carry_runs += pass_runs;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *run_count = carry_runs < max_runs ? carry_runs : static_cast<std::int32_t>(max_runs);
  for (std::int64_t p = threadIdx.x; p < pairs; p += kPlanThreads)
    TakeRow(ids, p, top_k, experts, cursor, row_of_pair, token_of_row);
}

// One block per (token, kCombineThreads columns), a thread per column: the token's rows and
// weights are staged in shared memory once, then a column's k products are independent loads,
// summed in k order. (A block per token looping over the columns took 13 µs at batch 1: each
// column's loads waited on the pair's row index.)
constexpr int kCombineThreads = 256, kMaxCombinePairs = 128;
__global__ void __launch_bounds__(kCombineThreads) CombineKernel(const float* y, const std::int32_t* row_of_pair,
                                                                 const float* weights, int top_k, std::int64_t hidden,
                                                                 void* out, Elem oe) {
  __shared__ std::int32_t rows[kMaxCombinePairs];
  __shared__ float w[kMaxCombinePairs];
  const std::int64_t t = blockIdx.x;
  for (int k = threadIdx.x; k < top_k; k += kCombineThreads) {
    rows[k] = row_of_pair[t * top_k + k];
    w[k] = weights[t * top_k + k];
  }
  __syncthreads();
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.y) * kCombineThreads + threadIdx.x;
  if (j >= hidden) return;
  float acc = 0.0f;
#pragma unroll 8
  for (int k = 0; k < top_k; ++k)
    if (rows[k] >= 0) acc += y[static_cast<std::int64_t>(rows[k]) * hidden + j] * w[k];
  StoreF(out, t * hidden + j, oe, acc);
}

}  // namespace

void MoeRoute(CudaContext& ctx, const Tensor& router_logits, const Tensor& bias, const MoeRouting& r,
              const Tensor& topk_ids, const Tensor& topk_weights) {
  const std::int64_t n = router_logits.shape[0], experts = r.num_experts;
  FISSION_CHECK(router_logits.shape[1] == experts && bias.numel() == experts && r.n_group > 0 &&
                    experts % r.n_group == 0 && r.n_group <= kMaxGroups && r.topk_group <= r.n_group &&
                    r.top_k <= kMaxTopK && r.top_k <= experts * r.topk_group / r.n_group,
                "MoeRoute configuration: ", experts, " experts, ", r.n_group, " groups, top ", r.topk_group,
                " groups, top_k ", r.top_k);
  const std::int64_t columns = r.top_k + r.shared_experts;
  FISSION_CHECK(topk_ids.dtype == DType::kI32 && topk_weights.dtype == DType::kF32 && r.shared_experts >= 0 &&
                topk_ids.numel() == n * columns && topk_weights.numel() == n * columns, "MoeRoute outputs: ids ",
                topk_ids.shape.ToString(), ", weights ", topk_weights.shape.ToString(), " for ", n, " tokens and ",
                columns, " columns");
  if (n == 0) return;
  const std::size_t smem = static_cast<std::size_t>(experts) * 3 * sizeof(float);
  MoeRouteKernel<<<static_cast<unsigned>(n), 32, smem, ctx.stream()>>>(
      router_logits.data, ElemOf(router_logits), bias.data, ElemOf(bias), static_cast<int>(experts),
      static_cast<int>(r.n_group), static_cast<int>(r.topk_group), static_cast<int>(r.top_k),
      static_cast<int>(r.shared_experts), r.norm_topk_prob,
      r.routed_scaling_factor, topk_ids.ptr<std::int32_t>(), topk_weights.ptr<float>());
  FISSION_LAUNCHED();
}

ExpertRows PermuteByExpert(CudaContext& ctx, const Tensor& topk_ids, int experts) {
  const std::int64_t n = topk_ids.shape[0], top_k = topk_ids.shape[1];
  FISSION_CHECK(topk_ids.dtype == DType::kI32, "expert ids must be int32");
  ExpertRows rows;
  rows.pairs = n * top_k;
  Buffer counts(DType::kI32, Shape{experts + 1}, ctx.allocator());  // the last slot flags bad ids
  FISSION_CUDA(cudaMemsetAsync(counts.tensor().data, 0, (experts + 1) * sizeof(int), ctx.stream()));
  CountKernel<<<Blocks(rows.pairs, 256), 256, 0, ctx.stream()>>>(topk_ids.ptr<std::int32_t>(), rows.pairs, experts,
                                                                 counts.ptr<int>(), counts.ptr<int>() + experts);
  FISSION_LAUNCHED();
  std::vector<int> host_counts(experts + 1);
  ctx.DownloadBytes(host_counts.data(), counts.tensor().data, host_counts.size() * sizeof(int));
  FISSION_CHECK(host_counts[experts] == 0, "MoeExperts: expert id outside [0, ", experts, ")");
  rows.offsets.assign(experts + 1, 0);
  for (int e = 0; e < experts; ++e) rows.offsets[e + 1] = rows.offsets[e] + host_counts[e];
  DeviceMeta cursor = ctx.Upload(std::span<const int>(rows.offsets.data(), experts));
  rows.row_of_pair = Buffer(DType::kI32, Shape{rows.pairs}, ctx.allocator());
  rows.token_of_row = Buffer(DType::kI32, Shape{rows.pairs}, ctx.allocator());
  PermuteKernel<<<Blocks(rows.pairs, 256), 256, 0, ctx.stream()>>>(
      topk_ids.ptr<std::int32_t>(), rows.pairs, static_cast<int>(top_k), experts, cursor.ptr<int>(),
      rows.row_of_pair.ptr<std::int32_t>(), rows.token_of_row.ptr<std::int32_t>());
  FISSION_LAUNCHED();
  return rows;
}

std::int64_t MaxExpertRuns(std::int64_t pairs, std::int64_t experts, int run_rows) {
  return (pairs + (run_rows - 1) * std::min(experts, pairs)) / run_rows;
}

void ForEachRunSlice(std::int64_t n, std::int64_t top_k, std::int64_t experts,
                     const std::function<void(std::int64_t, std::int64_t)>& run, int run_rows) {
  std::int64_t slice = n;
  while (slice > 1 && MaxExpertRuns(slice * top_k, experts, run_rows) > kMaxGridY) slice = (slice + 1) / 2;
  for (std::int64_t t0 = 0; t0 < n; t0 += slice) run(t0, std::min(n, t0 + slice));
}

ExpertRows PermuteByExpertOnDevice(CudaContext& ctx, const Tensor& topk_ids, int experts, int run_rows) {
  const std::int64_t n = topk_ids.shape[0], top_k = topk_ids.shape[1];
  FISSION_CHECK(topk_ids.dtype == DType::kI32 && run_rows > 0, "expert ids must be int32 (got ",
                DTypeName(topk_ids.dtype), "), runs of at least one row (got ", run_rows, ")");
  ExpertRows rows;
  rows.pairs = n * top_k;
  rows.max_runs = MaxExpertRuns(rows.pairs, experts, run_rows);
  static_assert(sizeof(ExpertRun) == 3 * sizeof(std::int32_t));
  rows.runs = Buffer(DType::kI32, Shape{std::max<std::int64_t>(rows.max_runs, 1) * 3}, ctx.allocator());
  rows.run_count = Buffer(DType::kI32, Shape{1}, ctx.allocator());
  rows.row_of_pair = Buffer(DType::kI32, Shape{rows.pairs}, ctx.allocator());
  rows.token_of_row = Buffer(DType::kI32, Shape{rows.pairs}, ctx.allocator());
  const std::size_t smem = 2 * static_cast<std::size_t>(experts) * sizeof(int);
  FISSION_CHECK(smem <= 48 * 1024, "PermuteByExpertOnDevice: ", experts, " experts do not fit one block's plan");
  PlanOnDeviceKernel<<<1, kPlanThreads, smem, ctx.stream()>>>(
      topk_ids.ptr<std::int32_t>(), rows.pairs, static_cast<int>(top_k), experts, run_rows,
      rows.runs.ptr<ExpertRun>(), rows.max_runs, rows.run_count.ptr<std::int32_t>(),
      rows.row_of_pair.ptr<std::int32_t>(), rows.token_of_row.ptr<std::int32_t>());
  FISSION_LAUNCHED();
  return rows;
}

void CombineExperts(CudaContext& ctx, const ExpertRows& rows, const Tensor& y, const Tensor& topk_weights,
                    const Tensor& out) {
  const std::int64_t n = topk_weights.shape[0], top_k = topk_weights.shape[1], hidden = y.shape[1];
  FISSION_CHECK(y.dtype == DType::kF32 && topk_weights.dtype == DType::kF32 && out.numel() == n * hidden &&
                    top_k <= kMaxCombinePairs && (hidden + kCombineThreads - 1) / kCombineThreads <= 65535,
                "CombineExperts arguments: y ", y.shape.ToString(), ", weights ", topk_weights.shape.ToString(),
                ", out ", out.shape.ToString());
  if (n == 0) return;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((hidden + kCombineThreads - 1) / kCombineThreads));
  CombineKernel<<<grid, kCombineThreads, 0, ctx.stream()>>>(y.ptr<float>(), rows.row_of_pair.ptr<std::int32_t>(),
                                                            topk_weights.ptr<float>(), static_cast<int>(top_k), hidden,
                                                            out.data, ElemOf(out));
  FISSION_LAUNCHED();
}

namespace {

// bf16 decode: the permutation and run lists built on the device and every expert's rows through
// the bf16 run GEMV (gemv_bf16.cu), products and the SiLU in fp32; nothing waits for the device or
// uploads step data, so the step can be captured. The GEMV's inputs (the gathered rows and the
// SiLU's output) are stored in bf16, the rounding its MMA applies to fp32 inputs anyway (the same
// bits), so each of the many blocks that re-read a run's rows from L2 reads half the bytes.
void DeviceRoutedExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                         std::span<const Tensor> gate_up, std::span<const Tensor> down, const Tensor& out,
                         float limit) {
  const std::int64_t hidden = x.shape[1], inter = down[0].shape[1];
  const int experts = static_cast<int>(gate_up.size());
  const void* const* gu_table = ctx.PointerTable(gate_up, {}, "MoeExperts (gate_up)");
  const void* const* down_table = ctx.PointerTable(down, {}, "MoeExperts (down)");
  const ExpertRows rows = PermuteByExpertOnDevice(ctx, topk_ids, experts);
  const auto* runs = rows.runs.ptr<ExpertRun>();
  const auto* run_count = rows.run_count.ptr<std::int32_t>();
  Buffer xp(DType::kBF16, Shape{rows.pairs, hidden}, ctx.allocator()),
      gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kBF16, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GatherRowsDevice(ctx, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs, xp);
  Bf16GemvRuns(ctx, xp, runs, run_count, rows.max_runs, gu_table, 2 * inter, gu);
  SiluMul(ctx, gu, act, limit);
  Bf16GemvRuns(ctx, act, runs, run_count, rows.max_runs, down_table, hidden, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace

void MoeExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                std::span<const Tensor> gate_up, std::span<const Tensor> down, const Tensor& out, float limit) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  const int experts = static_cast<int>(gate_up.size());
  FISSION_CHECK(experts > 0 && down.size() == gate_up.size() && topk_ids.dtype == DType::kI32 &&
                topk_weights.dtype == DType::kF32 && out.numel() == n * hidden, "MoeExperts arguments");
  if (n == 0) return;
  const std::int64_t inter = down[0].shape[1];
  const DType wtype = gate_up[0].dtype;
  for (int e = 0; e < experts; ++e)
    FISSION_CHECK(down[e].shape[1] == inter && gate_up[e].shape[0] == 2 * inter && gate_up[e].dtype == wtype &&
                  down[e].dtype == wtype, "expert ", e, " differs in shape or dtype from expert 0");
  // A rule on shapes and weights only: an eager step and its replay run the same kernels.
  if (n <= kDeviceRoutedTokens && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) &&
      Bf16GemvRunsTakes(hidden, gate_up) && Bf16GemvRunsTakes(inter, down))
    return DeviceRoutedExperts(ctx, x, topk_ids, topk_weights, gate_up, down, out, limit);
  const ExpertRows rows = PermuteByExpert(ctx, topk_ids, experts);
  const std::vector<int>& offsets = rows.offsets;
  const std::int64_t pairs = rows.pairs;
  // Rows grouped by expert, in the weights' dtype; expert outputs in fp32 for the weighted sum.
  Buffer xp(wtype, Shape{pairs, hidden}, ctx.allocator()), gu(wtype, Shape{pairs, 2 * inter}, ctx.allocator()),
      act(wtype, Shape{pairs, inter}, ctx.allocator()), y(DType::kF32, Shape{pairs, hidden}, ctx.allocator());
  GatherRowsDevice(ctx, x, rows.token_of_row.ptr<std::int32_t>(), pairs, xp);
  for (int e = 0; e < experts; ++e)
    if (offsets[e + 1] > offsets[e])
      Linear(ctx, xp.tensor().Rows(offsets[e], offsets[e + 1]), gate_up[e], gu.tensor().Rows(offsets[e], offsets[e + 1]));
  SiluMul(ctx, gu, act, limit);
  for (int e = 0; e < experts; ++e)
    if (offsets[e + 1] > offsets[e])
      Linear(ctx, act.tensor().Rows(offsets[e], offsets[e + 1]), down[e], y.tensor().Rows(offsets[e], offsets[e + 1]));
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace fission::kernels::cuda
