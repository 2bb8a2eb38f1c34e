// The CUDA operations behind CudaBackend, one file per concept. Tensors live on the context's
// device; host spans are metadata uploaded per call.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fission::kernels::cuda {

// elementwise.cu
void Convert(CudaContext& ctx, const Tensor& src, const Tensor& dst);  // fp32 <-> bf16 (or copy)
// Rows ids[i] - vocab_start of the table; zeros for ids outside it (vocab-parallel shards).
void Embedding(CudaContext& ctx, const Tensor& table, std::span<const std::int32_t> ids, std::int64_t vocab_start,
               const Tensor& out);
void Zero(CudaContext& ctx, const Tensor& x);
void RmsNorm(CudaContext& ctx, const Tensor& x, const Tensor& weight, float eps, const Tensor& out);
// h += y, then out = RmsNorm(h) in one kernel, bit-identical to Add then RmsNorm.
void AddRmsNorm(CudaContext& ctx, const Tensor& h, const Tensor& y, const Tensor& weight, float eps,
                const Tensor& out);
void LayerNorm(CudaContext& ctx, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
               const Tensor& out);
void Add(CudaContext& ctx, const Tensor& a, const Tensor& b, const Tensor& out);
// silu(gate) · up; with limit > 0 DeepSeek-V4's clamp first (kernels/v4_ops.h, ClampedSwiGlu).
void SiluMul(CudaContext& ctx, const Tensor& gate_up, const Tensor& out, float limit = 0.0f);
void Rope(CudaContext& ctx, const Tensor& x, std::int64_t rope_offset, std::int64_t rope_dim,
          std::span<const std::int32_t> positions, const Tensor& inv_freq, float scaling, bool interleaved);
void WriteKv(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache);
void GatherRows(CudaContext& ctx, const Tensor& x, std::span<const std::int32_t> indices, const Tensor& out);
// Device-index variant used inside other operations.
void GatherRowsDevice(CudaContext& ctx, const Tensor& x, const std::int32_t* indices, std::int64_t count,
                      const Tensor& out);

// gemm.cu
void Linear(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out);
// gemv_bf16.cu: bf16 weights and at most 8 tokens (fp32 or bf16 activations and output) on the
// tensor cores, reading the weight once; Bf16GemvTakes says whether the shapes and alignment fit.
bool Bf16GemvTakes(const Tensor& x, const Tensor& w, const Tensor& out);
void Bf16Gemv(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out);
// The same for fp32 weights and activations (gemv_f32.cu: fp32 arithmetic, a block per weight row
// and 8 tokens, up to kDeviceRoutedTokens tokens, k % 4 == 0 and 16-byte aligned rows).
bool F32GemvTakes(const Tensor& x, const Tensor& w, const Tensor& out);
void F32Gemv(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out);
// More tokens on narrow fp32 weights (gemm_f32.cu: fp32 arithmetic, 64 × 64 tiles, at most 512
// weight rows: DeepSeek-V4's routers, which cuBLASLt's fp32 GEMM ran near 1 TFLOP/s).
bool F32GemmTakes(const Tensor& x, const Tensor& w, const Tensor& out);
void F32Gemm(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& out);
// fp8.cu
// How an FP8 product quantizes its activations: per token and 128-group (the block format), or per
// token over the whole row (ptpc_fp8), that scale then standing in every group's slot.
enum class Fp8Activations : std::uint8_t { kPerGroup, kPerToken };
void LinearFp8(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out,
               Fp8Activations rule = Fp8Activations::kPerGroup);
// fp8_per_channel.cu: e4m3 weights with one fp32 scale per row (WeightFormat::Fp8PerChannel),
// activations per token: out[t, j] = s_x[t] · s_w[j] · Σ_k xq[t, k] · wq[j, k], on LinearFp8's
// paths with unit block scales, the row scales applied to the fp32 result. Routed experts of the
// format plan on the host (counts read back) and run each active expert's rows through it.
void LinearFp8PerChannel(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out);
void MoeExpertsFp8PerChannel(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                             std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                             std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out,
                             float limit = 0.0f);
// Per-token 1×128 quantization of x [n, k] to e4m3 codes [n, k] and fp32 scales, the scale of
// token i and group g at scales[i * token_stride + g * group_stride].
void QuantizeFp8(CudaContext& ctx, const Tensor& x, std::uint8_t* codes, float* scales, std::int64_t token_stride,
                 std::int64_t group_stride);

// The FP8 GEMV (fp8.cu) for callers that run many small products (the routed experts):
// activations quantized per token and 128-group, e4m3 codes [n, k], scales token-major
// [n][⌈k/128⌉]; each item multiplies rows [row0, row0 + rows) by its own e4m3 weight [m, k] with
// fp32 block scales into the same rows of out [n, m] (fp32 or bf16). Needs k % 16 == 0.
struct Fp8GemvInput {
  Buffer codes, scales;
};
struct Fp8GemvItem {
  const std::uint8_t* w;
  const float* w_scale;
  std::int64_t row0, rows;
};
bool Fp8GemvTakes(std::int64_t k);
Fp8GemvInput QuantizeForGemv(CudaContext& ctx, const Tensor& x, Fp8Activations rule = Fp8Activations::kPerGroup);
void Fp8GemvGrouped(CudaContext& ctx, const Fp8GemvInput& in, std::span<const Fp8GemvItem> items, std::int64_t m,
                    std::int64_t k, const Tensor& out);
// The same GEMV over a run list built on the device (moe.cu): run i multiplies rows [row0, row0 +
// rows) by expert `expert`'s weight, found in a device table of the experts' weight and scale
// pointers. The grid covers max_runs runs, a bound from shapes; blocks past *run_count return.
inline constexpr int kGemvRunRows = 8;  // rows of a run: the MMA's 8 token columns
struct ExpertRun {
  std::int32_t expert, row0, rows;
};
struct Fp8ExpertTable {
  const std::uint8_t* const* w;
  const float* const* w_scale;
};
void Fp8GemvRuns(CudaContext& ctx, const Fp8GemvInput& in, const ExpertRun* runs, const std::int32_t* run_count,
                 std::int64_t max_runs, const Fp8ExpertTable& table, std::int64_t m, std::int64_t k,
                 const Tensor& out);

// The bf16 GEMV over a device-built run list (the routed experts' decode path, moe.cu): run i
// multiplies rows [row0, row0 + rows) of x [pairs, k] (fp32 or bf16) by expert `expert`'s bf16
// weight [m, k], found in a device table of the experts' weight pointers, into the same rows of
// out [pairs, m]. Bf16GemvRunsTakes: every weight bf16 [*, k], 16-byte aligned, k % 8 == 0.
bool Bf16GemvRunsTakes(std::int64_t k, std::span<const Tensor> w);
void Bf16GemvRuns(CudaContext& ctx, const Tensor& x, const ExpertRun* runs, const std::int32_t* run_count,
                  std::int64_t max_runs, const void* const* expert_weights, std::int64_t m, const Tensor& out);

// mla_reference.cu: whether the tuned MLA kernels take this shape, and the fp32 reference kernel
// that takes any (contexts up to 8192 keys).
// mla_latent.cu: rows [n, kv_lora_rank + rope] into the cache in the shape's format (FP8 entries
// quantized on the device by the CPU backend's rule), and a step's rows (cache slots on the
// device) out of it as bf16 [count, kv_lora_rank + rope].
void WriteLatent(CudaContext& ctx, const Tensor& rows, std::span<const std::int64_t> slots, const Tensor& cache,
                 const MlaShape& sh);
void GatherLatent(CudaContext& ctx, const Tensor& cache, const MlaShape& sh, const std::int32_t* slots,
                  std::int64_t count, const Tensor& out);
// MlaOps::SplitLatents: a block per row, both norms' sums in one pass (each in RmsNorm's order).
void SplitLatents(CudaContext& ctx, const Tensor& a, const Tensor& q_norm, const Tensor& kv_norm, float eps,
                  const RopeArgs& rope, const Tensor& q_latent, const Tensor& kv_row);
bool MlaTunedShape(const MlaShape& sh, bool absorbed);
void MlaAttentionReference(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                           std::span<const SeqAttention> seqs, const MlaShape& sh, const Tensor& out);

// moe.cu
void MoeRoute(CudaContext& ctx, const Tensor& router_logits, const Tensor& bias, const MoeRouting& routing,
              const Tensor& topk_ids, const Tensor& topk_weights);
void MoeExperts(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                std::span<const Tensor> gate_up, std::span<const Tensor> down, const Tensor& out, float limit = 0.0f);
// The routed experts' token permutation (moe.cu), shared by MoeExperts and MoeExpertsFp8: the
// (token, k) pairs grouped by expert, expert e's rows being [offsets[e], offsets[e + 1]).
// PermuteByExpert reads the per-expert counts back to the host and fills `offsets`.
// PermuteByExpertOnDevice waits for nothing (a captured step can run it): the offsets stay on the
// device, and `runs` lists each expert's rows in runs of at most run_rows (kGemvRunRows for the
// GEMVs, kGroupedTileRows for the grouped GEMM), *run_count of them, at most max_runs (a bound
// from shapes). Routing produces ids in [0, experts); an id outside it
// gets no row (row_of_pair -1, skipped by the combine) and its token's other pairs are unaffected.
struct ExpertRows {
  std::int64_t pairs = 0;
  std::vector<int> offsets;
  Buffer row_of_pair, token_of_row;  // I32 [pairs]
  Buffer runs, run_count;            // ExpertRun [max_runs], I32 [1] (device path)
  std::int64_t max_runs = 0;
};
ExpertRows PermuteByExpert(CudaContext& ctx, const Tensor& topk_ids, int experts);
ExpertRows PermuteByExpertOnDevice(CudaContext& ctx, const Tensor& topk_ids, int experts,
                                   int run_rows = kGemvRunRows);
// Runs of at most R = run_rows rows that `pairs` pairs over `experts` experts can need: an expert
// with c rows needs ⌈c/R⌉ ≤ (c + R - 1)/R runs, at most min(experts, pairs) experts have rows, so
// the runs number at most ⌊(pairs + (R - 1)·min(experts, pairs)) / R⌋.
std::int64_t MaxExpertRuns(std::int64_t pairs, std::int64_t experts, int run_rows = kGemvRunRows);
// run(t0, t1) over consecutive slices of [0, n) tokens of top_k pairs each, halved until a slice's
// runs of run_rows fit one grid's kMaxGridY rows (only a prefill of tens of thousands of tokens is
// sliced).
void ForEachRunSlice(std::int64_t n, std::int64_t top_k, std::int64_t experts,
                     const std::function<void(std::int64_t, std::int64_t)>& run, int run_rows = kGemvRunRows);
// out[t] = Σ_k weights[t, k] · y[row_of_pair[t, k]] (fp32 y [pairs, hidden]), k in a fixed order.
void CombineExperts(CudaContext& ctx, const ExpertRows& rows, const Tensor& y, const Tensor& topk_weights,
                    const Tensor& out);
// moe_fp8.cu. Up to kDeviceRoutedTokens tokens (decode) and with k % 16 == 0 in both products,
// every expert runs on the grouped GEMV from run lists built on the device: no host wait, no upload
// of step data, so the step can be captured as a CUDA graph. More tokens (prefill) take the
// host-planned path. A rule on shapes only: an eager step and its replay run the same kernels.
// MoeExperts takes the same rule for bf16 experts (the bf16 run GEMV); fp32 experts and larger
// calls read the per-expert counts back to plan one GEMM per expert, and cannot be captured.
inline constexpr std::int64_t kDeviceRoutedTokens = 256;
void MoeExpertsFp8(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                   std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out,
                   float limit = 0.0f);

// moe_mx.cu: OCP microscaled weights, MXFP4 (e2m1 codes two a byte) and MXFP8 (e4m3 codes), with
// e8m0 scales per 1x32 of a row, read as stored (MXFP4 decoded in registers); activations quantized
// per token and 1x32 by the weight's MX rule, as the CPU reference does. The weight's DType (kF4E2M1
// or kF8E4M3) picks the kernels. MxGemvTakes: k % 8 == 0 (every row of codes starts on a word).
// The routed experts plan on the device at every size (capturable); Linear runs the same GEMV
// over tiles of 8 tokens.
struct MxInput {
  Buffer codes, scales;  // the GEMV's layout (moe_mx.cu)
  std::int64_t k = 0;
  DType codes_type = DType::kF4E2M1;
};
bool MxGemvTakes(std::int64_t k);
// Rows r of x (or rows row_map[r] when given), `rows` of them, quantized for a GEMV with weight
// codes of type `codes`.
MxInput QuantizeMx(CudaContext& ctx, DType codes, const Tensor& x, const std::int32_t* row_map, std::int64_t rows);
void LinearMx(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out);
// The GEMV over a device-built run list (as Fp8GemvRuns): run i multiplies rows [row0, row0 + rows)
// of the quantized activations by expert `expert`'s codes [m, k] and e8m0 scales, found in device
// tables of the experts' pointers, into the same rows of out [pairs, m] (fp32 or bf16).
void MxGemvRuns(CudaContext& ctx, const MxInput& in, const ExpertRun* runs, const std::int32_t* run_count,
                std::int64_t max_runs, const void* const* expert_codes, const void* const* expert_scales,
                std::int64_t m, std::int64_t k, const Tensor& out);
void MoeExpertsMx(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                  std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale, std::span<const Tensor> down,
                  std::span<const Tensor> down_scale, const Tensor& out, float limit = 0.0f);

// moe_fp4.cu: DeepSeek-V4's FP4 weights (WeightFormat::Mxfp4A8): e2m1 codes with e8m0 scales per
// 1x32 of a row, read as stored and decoded into e4m3 in registers, times the activations
// quantized to e4m3 per 1x128 with power-of-two scales (QuantizeFp4Input), on the tensor cores
// (mma.sync m16n8k32 e4m3, one MMA per weight group) with both scales applied to the group's fp32
// sums: W4A8, DeepSeek-V4's fp4_gemm. Fp4GemvTakes: k % 32 == 0 (whole weight groups). The
// routed experts plan on the device at every size (capturable), their rows gathered and quantized,
// silu·up (clamped at `limit`) quantized between the products; Linear runs the same GEMV over
// tiles of 8 tokens.
bool Fp4GemvTakes(std::int64_t k);
void LinearFp4(CudaContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor& out);
// Activations as the FP4 GEMV takes them: e4m3 codes [n, k] and one fp32 scale (a power of two,
// 2^Ue8m0Exponent(amax)) per 128 values [n, ceil(k / 128)] (a shorter last block over its own).
struct Fp4Input {
  Buffer codes, scales;
};
Fp4Input QuantizeFp4Input(CudaContext& ctx, const Tensor& x);
// The GEMV over a device-built run list (as MxGemvRuns): run i multiplies rows [row0, row0 + rows)
// of the quantized x [pairs, k] by expert `expert`'s codes [m, k] and e8m0 scales, found in device
// tables of the experts' pointers, into the same rows of out [pairs, m] (fp32 or bf16).
void Fp4GemvRuns(CudaContext& ctx, const Fp4Input& x, const ExpertRun* runs, const std::int32_t* run_count,
                 std::int64_t max_runs, const void* const* expert_codes, const void* const* expert_scales,
                 std::int64_t m, const Tensor& out);
// Which products the FP4 experts' prefill runs: the grouped GEMM (moe_grouped.cu) where the shapes
// take it, or the 8-row run GEMV it replaced (which other shapes still run, and which benchmarks
// and tests compare it with).
enum class ExpertsPrefill : std::uint8_t { kGrouped, kPerExpert };
// Prefill-sized calls (more than kDeviceRoutedTokens tokens, k % 128 == 0 in both products) run
// both products on the grouped GEMM over 128-row runs, still planned on the device.
void MoeExpertsFp4(CudaContext& ctx, const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                   std::span<const Tensor> gate_up, std::span<const Tensor> gate_up_scale,
                   std::span<const Tensor> down, std::span<const Tensor> down_scale, const Tensor& out,
                   float limit = 0.0f, ExpertsPrefill prefill = ExpertsPrefill::kGrouped);

// moe_grouped.cu: the FP4 experts' prefill products, one grouped tensor-core GEMM launch per
// product over the rows of every expert (grouped by expert, as the permutations leave them). A
// row tile is an ExpertRun of at most kGroupedTileRows rows; the list is on the device, max_tiles
// long, of which *tile_count are valid when tile_count is given (blocks past it return at once).
inline constexpr int kGroupedTileRows = 128;
// W4A8: rows quantized by QuantizeFp4Input times each tile's expert e2m1 codes [m, k] with e8m0
// scales (device tables, as Fp4GemvRuns) into out [pairs, m] (fp32 or bf16): the GEMV's products,
// summed in another fp32 order. GroupedGemmFp4Takes: k % 128 == 0 (whole activation blocks) and
// k ≤ 7,680 (the weights' scale codes for all of k in shared memory); GroupedGemmFp4 raises an
// Error otherwise.
bool GroupedGemmFp4Takes(std::int64_t k);
void GroupedGemmFp4(CudaContext& ctx, const Fp4Input& x, const ExpertRun* tiles, const std::int32_t* tile_count,
                    std::int64_t max_tiles, const void* const* expert_codes, const void* const* expert_scales,
                    std::int64_t m, const Tensor& out);

// mla_attention.cu
void MlaAttentionExpanded(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& shape, const Tensor& out);
void MlaAttentionAbsorbed(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b,
                          std::span<const SeqAttention> seqs, const MlaShape& shape, const Tensor& out);

// DeepSeek Sparse Attention (kernels/dsa_ops.h). dsa_indexer.cu: the index key cache (exact rows
// of fp32 or bf16, or e4m3 codes and an fp32 scale per token) and the indexer's scoring and top-k
// (dsa_topk.cu); dsa_sparse_mla.cu: MLA over each row's selected positions, both forms computed in
// the latent space. All three are capturable for a pure decode step.
void WriteIndexKeys(CudaContext& ctx, const Tensor& keys, std::span<const std::int64_t> slots, const Tensor& cache,
                    const IndexerShape& shape);
void IndexerTopK(CudaContext& ctx, const Tensor& q, const Tensor& weights, const Tensor& cache,
                 std::span<const SeqAttention> seqs, const IndexerShape& shape, const Tensor& topk);
void SparseMla(CudaContext& ctx, const Tensor& q, const Tensor& cache, const Tensor& kv_b, const Tensor& topk,
               std::span<const SeqAttention> seqs, const MlaShape& shape, const Tensor& out);

// sampling.cu
void Sample(CudaContext& ctx, const Tensor& logits, std::span<const SamplingRow> rows, std::span<SampledToken> out);

}  // namespace fission::kernels::cuda
