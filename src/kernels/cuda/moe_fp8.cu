// FP8 routed experts: the token permutation of moe.cu, then each active expert's rows through its
// e4m3 gate_up and down weights with fp8.cu's GEMM paths. Decode-sized calls (kDeviceRoutedTokens)
// plan on the device and run every expert on the grouped GEMV, so they can be captured as a CUDA
// graph. Larger calls plan on the host: experts with a few rows share one grouped GEMV launch,
// experts with more rows run LinearFp8 on their rows (cuBLASLt block scaling). All paths quantize
// every row per token and 128-group, as the CPU does.
#include <optional>
#include <vector>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/op_timer.h"

namespace fission::kernels::cuda {
namespace {

// Up to this many rows an expert takes the GEMV (two passes of 8 rows over its weight at most);
// above it, LinearFp8 (cuBLASLt, padded to 32 rows below 32). An estimate from the LinearFp8
// benchmark (GEMV at 1-2 tokens against cuBLASLt at 8-32), not yet tuned on the device.
constexpr int kGemvExpertRows = 16;

// out rows of expert e = x rows of expert e through (w[e], w_scale[e]).
void ExpertProducts(CudaContext& ctx, const ExpertRows& rows, const Tensor& x, std::span<const Tensor> w,
                    std::span<const Tensor> w_scale, const Tensor& out) {
  const std::int64_t m = w[0].shape[0], k = w[0].shape[1];
  std::vector<Fp8GemvItem> small;
  for (std::size_t e = 0; e < w.size(); ++e) {
    const std::int64_t begin = rows.offsets[e], end = rows.offsets[e + 1];
    if (begin == end) continue;
    if (end - begin <= kGemvExpertRows && Fp8GemvTakes(k)) {
      small.push_back({w[e].ptr<std::uint8_t>(), w_scale[e].ptr<float>(), begin, end - begin});
    } else {
      OpTimer timer(ctx, ".moe_fp8 expert LinearFp8", end - begin);
      LinearFp8(ctx, x.Rows(begin, end), w[e], w_scale[e], out.Rows(begin, end));
    }
  }
  if (small.empty()) return;
  OpTimer timer(ctx, ".moe_fp8 grouped GEMV", static_cast<std::int64_t>(small.size()));
  // Quantizing all rows at once gives each row the codes a per-expert call would: scales are per
  // token and group.
  const Fp8GemvInput in = QuantizeForGemv(ctx, x);
  Fp8GemvGrouped(ctx, in, small, m, k, out);
}

void CheckWeights(std::span<const Tensor> w, std::span<const Tensor> w_scale, std::int64_t m, std::int64_t k,
                  const char* what) {
  FISSION_CHECK(w.size() == w_scale.size(), "MoeExpertsFp8: ", w.size(), " ", what, " weights, ", w_scale.size(),
                " scales");
  const std::int64_t scales = ((m + 127) / 128) * ((k + 127) / 128);
  for (std::size_t e = 0; e < w.size(); ++e)
    FISSION_CHECK(w[e].dtype == DType::kF8E4M3 && w[e].rank() == 2 && w[e].shape[0] == m && w[e].shape[1] == k &&
                      w_scale[e].dtype == DType::kF32 && w_scale[e].numel() == scales,
                  "MoeExpertsFp8: expert ", e, " ", what, " is ", DTypeName(w[e].dtype), w[e].shape.ToString(),
                  " with scales ", w_scale[e].shape.ToString(), "; expected e4m3 [", m, ", ", k, "] and ", scales,
                  " fp32 scales");
}

// The experts' weight and scale pointers on the device, one table per weight set, kept by the
// context (built by an eager call; a capture finds it there).
Fp8ExpertTable ExpertTable(CudaContext& ctx, std::span<const Tensor> w, std::span<const Tensor> w_scale,
                           const char* what) {
  const void* const* table = ctx.PointerTable(w, w_scale, what);
  return {reinterpret_cast<const std::uint8_t* const*>(table),
          reinterpret_cast<const float* const*>(table + w.size())};
}

// Decode: the permutation and the run lists are built on the device and every expert's rows run on
// the grouped GEMV; nothing waits for the device or uploads step data.
void DeviceRoutedExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                         std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                         std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out,
                         float limit) {
  const std::int64_t hidden = x.shape[1], inter = down[0].shape[1];
  const int experts = static_cast<int>(gate_up.size());
  const Fp8ExpertTable gu_table = ExpertTable(ctx, gate_up, gate_up_scale, "MoeExpertsFp8 (gate_up)");
  const Fp8ExpertTable down_table = ExpertTable(ctx, down, down_scale, "MoeExpertsFp8 (down)");
  std::optional<OpTimer> timer(std::in_place, ctx, ".moe_fp8 device plan", x.shape[0]);
  const ExpertRows rows = PermuteByExpertOnDevice(ctx, topk_ids, experts);
  const auto* runs = rows.runs.ptr<ExpertRun>();
  const auto* run_count = rows.run_count.ptr<std::int32_t>();
  timer.emplace(ctx, ".moe_fp8 device runs GEMV", rows.max_runs);
  Buffer xp(x.dtype, Shape{rows.pairs, hidden}, ctx.allocator()),
      gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kF32, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GatherRowsDevice(ctx, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs, xp);
  Fp8GemvRuns(ctx, QuantizeForGemv(ctx, xp), runs, run_count, rows.max_runs, gu_table, 2 * inter, hidden, gu);
  SiluMul(ctx, gu, act, limit);
  Fp8GemvRuns(ctx, QuantizeForGemv(ctx, act), runs, run_count, rows.max_runs, down_table, hidden, inter, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace

void MoeExpertsFp8(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                   std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out,
                   float limit) {
  const std::int64_t n = x.shape[0], hidden = x.shape[1];
  const int experts = static_cast<int>(gate_up.size());
  FISSION_CHECK(experts > 0 && down.size() == gate_up.size() && topk_weights.dtype == DType::kF32 &&
                    topk_ids.dtype == DType::kI32 && topk_ids.rank() == 2 && topk_ids.shape[0] == n &&
                    topk_weights.shape == topk_ids.shape && out.numel() == n * hidden,
                "MoeExpertsFp8 arguments");
  const std::int64_t inter = down[0].shape[1];
  CheckWeights(gate_up, gate_up_scale, 2 * inter, hidden, "gate_up");
  CheckWeights(down, down_scale, hidden, inter, "down");
  if (n == 0) return;
  if (n <= kDeviceRoutedTokens && Fp8GemvTakes(hidden) && Fp8GemvTakes(inter))
    return DeviceRoutedExperts(ctx, x, topk_ids, topk_weights, gate_up, gate_up_scale, down, down_scale, out, limit);
  std::optional<OpTimer> permute_timer(std::in_place, ctx, ".moe_fp8 permute", n);
  const ExpertRows rows = PermuteByExpert(ctx, topk_ids, experts);
  permute_timer.reset();
  // Rows grouped by expert in the activations' dtype; products and the silu in fp32, so the second
  // quantization sees the values the CPU reference sees (up to summation order).
  Buffer xp(x.dtype, Shape{rows.pairs, hidden}, ctx.allocator()),
      gu(DType::kF32, Shape{rows.pairs, 2 * inter}, ctx.allocator()),
      act(DType::kF32, Shape{rows.pairs, inter}, ctx.allocator()),
      y(DType::kF32, Shape{rows.pairs, hidden}, ctx.allocator());
  GatherRowsDevice(ctx, x, rows.token_of_row.ptr<std::int32_t>(), rows.pairs, xp);
  ExpertProducts(ctx, rows, xp, gate_up, gate_up_scale, gu);
  SiluMul(ctx, gu, act, limit);
  ExpertProducts(ctx, rows, act, down, down_scale, y);
  CombineExperts(ctx, rows, y, topk_weights, out);
}

}  // namespace fission::kernels::cuda
