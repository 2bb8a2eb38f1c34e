// Decode steps (and speculative decoding's verify, draft extend and draft steps) as CUDA graph
// replays (model/decode_graphs.h) against the same steps run eagerly,
// on DeepSeek-V3's dimensions (dummy FP8 weights, 2 layers, 64 routed experts): the shapes the
// tuned MLA kernels and the FP8 expert path take. A batch of exactly a captured size runs the
// same kernels on the same inputs as the eager step, so its logits must be bit-identical; a
// padded batch differs only in how the decode attention splits its keys (summation order).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/error.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "model/runtime/device_model.h"
#include "model/runtime/model_loader.h"
#include "model/spec_driver_testlib.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

constexpr double kPaddedBound = 1e-3;  // relative L2 of a padded replay's rows against eager

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::string ConfigDir(const char* name = "deepseek-v3") {
  return std::string(FISSION_SOURCE_DIR) + "/bench/configs/" + name;
}

// `extra` adds fields to the override (DSA's index_topk, say).
LoadOptions DummyV3(bool graphs, int tp = 1, bool fp8 = true, int layers = 2, const std::string& extra = "") {
  LoadOptions o;
  o.device = "cuda";
  o.dtype = "bfloat16";
  o.load_format = "dummy";
  o.tp_size = tp;
  o.json_model_override_args = StrCat(R"({"num_hidden_layers": )", layers,
                                      R"(, "first_k_dense_replace": 1, "n_routed_experts": 64)", extra,
                                      fp8 ? "}" : R"(, "quantization_config": null})");
  o.cuda_graphs.disabled = !graphs;
  o.cuda_graphs.batch_sizes = {1, 4, 8};
  return o;
}

struct Stats {
  int exact_rows = 0, rows = 0;
  double worst = 0.0;
};

// Prefills `lengths` in both runners, then decodes `steps` rounds of the sequences in `batches`
// (each a list of sequence indices, one step each), feeding both the graph model's greedy token.
// Rows of steps whose batch is a captured size must be bit-identical.
Stats DecodeBoth(CausalLM& graphs, CausalLM& eager, const std::vector<int>& lengths,
                 const std::vector<std::vector<int>>& batches, int steps, const std::vector<int>& sizes) {
  StepRunner a(graphs, 16, 600, 11), b(eager, 16, 600, 11);
  std::vector<int> seqs;
  std::vector<std::int32_t> next;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    seqs.push_back(a.AddSequence());
    b.AddSequence();
    const auto prompt = Tokens(lengths[i], 100 + i, graphs.vocab_size());
    const auto ra = a.Prefill(seqs.back(), prompt, false);
    const auto rb = b.Prefill(seqs.back(), prompt, false);
    EXPECT_EQ(ra.back(), rb.back()) << "prefill " << i << " (both eager) differs";
    next.push_back(Argmax(ra.back()));
  }
  Stats stats;
  for (int round = 0; round < steps; ++round) {
    for (const std::vector<int>& batch : batches) {
      std::vector<StepRunner::Chunk> chunks;
      for (int s : batch) chunks.push_back({seqs[s], {next[s]}});
      const auto ga = a.Step(chunks);
      const auto eb = b.Step(chunks);
      const bool exact = std::count(sizes.begin(), sizes.end(), static_cast<int>(batch.size())) > 0;
      for (std::size_t r = 0; r < batch.size(); ++r) {
        const double err = RelativeL2(ga[r], eb[r].data(), graphs.vocab_size());
        stats.worst = std::max(stats.worst, err);
        ++stats.rows;
        if (ga[r] == eb[r]) ++stats.exact_rows;
        if (exact) {
          EXPECT_EQ(ga[r], eb[r]) << "round " << round << ", batch of " << batch.size() << ", row " << r;
        } else {
          EXPECT_LE(err, kPaddedBound) << "round " << round << ", batch of " << batch.size() << ", row " << r;
        }
        EXPECT_EQ(Argmax(ga[r]), Argmax(eb[r])) << "round " << round << ", row " << r;
        next[batch[r]] = Argmax(ga[r]);
      }
    }
  }
  return stats;
}

// The batch-1 decode graph `model` captures at its first decode step (after a 20-token prompt).
kernels::cuda::CudaContext::CaptureCount CaptureBatchOne(CausalLM& model) {
  auto& device = dynamic_cast<DeviceCausalLM&>(model);
  const auto& ctx = dynamic_cast<kernels::cuda::CudaBackend&>(device.backend()).context();
  StepRunner r(model, 16, 64, 3);
  const int seq = r.AddSequence();
  r.Prefill(seq, Tokens(20, 50, model.vocab_size()), false);
  r.Step({{seq, {7}}});
  return ctx.last_capture();
}

TEST(CudaGraphs, ReplaysEqualEagerSteps) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  auto graphs = LoadCausalLM(ConfigDir(), DummyV3(true));
  auto eager = LoadCausalLM(ConfigDir(), DummyV3(false));
  // Batches of 8 and 1 (captured sizes), 5 and 3 (padded to 8 and 4); contexts from 6 to 330
  // tokens, crossing page boundaries as they grow.
  const std::vector<int> lengths = {5, 16, 17, 40, 100, 300, 33, 64};
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4, 5, 6, 7}, {2}, {0, 3, 5, 6, 7}, {1, 4, 7}};
  const Stats s = DecodeBoth(*graphs, *eager, lengths, batches, 20, {1, 4, 8});
  std::printf("cuda graphs vs eager: %d of %d rows bit-identical, worst relative L2 %.3g\n", s.exact_rows, s.rows,
              s.worst);
}

// DeepSeek-V3.2's dimensions with index_topk 64, so that most of these contexts are sparse: the
// indexer (fp8 keys, as a bf16 cache stores them), its top-k and sparse MLA decode run in graphs.
TEST(CudaGraphs, SparseAttentionReplaysEqualEagerSteps) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  const std::string topk = R"(, "index_topk": 64)";
  auto graphs = LoadCausalLM(ConfigDir("deepseek-v3.2"), DummyV3(true, 1, true, 2, topk));
  auto eager = LoadCausalLM(ConfigDir("deepseek-v3.2"), DummyV3(false, 1, true, 2, topk));
  const std::vector<int> lengths = {5, 16, 70, 40, 100, 300, 33, 64};
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4, 5, 6, 7}, {2}, {0, 3, 5, 6, 7}, {1, 4, 7}};
  const Stats s = DecodeBoth(*graphs, *eager, lengths, batches, 12, {1, 4, 8});
  std::printf("dsa cuda graphs vs eager: %d of %d rows bit-identical, worst relative L2 %.3g\n", s.exact_rows,
              s.rows, s.worst);
}

// DeepSeek-V4's decode (the tiny fixture in bf16, whose routed experts plan on the device: window
// 8, CSA at ratio 4, HCA at 16, a hash-routed layer) as replays: its step plan (ring slots, closed
// windows with places, query rows) is in the graph's input block, so across the ring and windows
// closing mid-batch every row of a captured size is bit-identical to the eager step's.
TEST(CudaGraphs, DeepSeekV4ReplaysEqualEagerSteps) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions o;
  o.device = "cuda";
  o.dtype = "bfloat16";
  o.cuda_graphs.batch_sizes = {1, 4, 8};
  LoadOptions eager_options = o;
  eager_options.cuda_graphs.disabled = true;
  const std::string dir = FixtureModelDir("tiny-deepseek-v4");
  auto graphs = LoadCausalLM(dir, o);
  auto eager = LoadCausalLM(dir, eager_options);
  ASSERT_GT(CaptureBatchOne(*LoadCausalLM(dir, o)).kernels, 0) << "no batch-1 DeepSeek-V4 graph was captured";
  const std::vector<int> lengths = {5, 16, 17, 40, 100, 30, 33, 9};
  const std::vector<std::vector<int>> batches = {{0, 1, 2, 3, 4, 5, 6, 7}, {2}, {0, 3, 5, 6, 7}, {1, 4, 7}};
  const Stats s = DecodeBoth(*graphs, *eager, lengths, batches, 20, {1, 4, 8});
  std::printf("deepseek-v4 cuda graphs vs eager: %d of %d rows bit-identical, worst relative L2 %.3g\n", s.exact_rows,
              s.rows, s.worst);
}

// The kernels a captured batch-1 V4 step launches per layer at V4-Flash's dimensions (dummy bf16
// weights, 64 experts; layers 2 and 3 are CSA and HCA), printed for docs/cuda_v4.md.
TEST(CudaGraphs, DeepSeekV4LaunchesPerLayer) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  kernels::cuda::CudaContext::CaptureCount counts[2];
  for (int i = 0; i < 2; ++i) {
    LoadOptions o;
    o.device = "cuda";
    o.dtype = "bfloat16";
    o.load_format = "dummy";
    o.json_model_override_args = StrCat(R"({"num_hidden_layers": )", 2 + 2 * i, R"(, "n_routed_experts": 64})");
    o.cuda_graphs.batch_sizes = {1};
    auto model = LoadCausalLM(ConfigDir("deepseek-v4-flash"), o);
    counts[i] = CaptureBatchOne(*model);
    ASSERT_GT(counts[i].kernels, 0) << "no batch-1 graph was captured at " << 2 + 2 * i << " layers";
  }
  std::printf("captured batch-1 deepseek-v4-flash decode step: %d kernels and %d other nodes at 2 layers, %d and %d "
              "at 4 layers: %d kernels a compressed layer\n",
              counts[0].kernels, counts[0].others, counts[1].kernels, counts[1].others,
              (counts[1].kernels - counts[0].kernels) / 2);
}

// Speculative decoding's captured steps with the NextN layer (its dummy weights): verify runs of 4
// tokens a sequence (every row's logits), the draft extend over the kept rows (padded to 4 rows a
// sequence, reading the hidden rows a replay kept) and the chained draft steps, against the same
// steps eagerly. Batches of captured sizes only: every row bit-identical.
TEST(CudaGraphs, VerifyAndDraftStepsReplayEagerSteps) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions with_graphs = DummyV3(true), without = DummyV3(false);
  with_graphs.load_draft = without.load_draft = true;
  auto graphs = LoadCausalLM(ConfigDir(), with_graphs);
  auto eager = LoadCausalLM(ConfigDir(), without);
  int exact = 0, rows = 0;
  const CompareSteps compare = [&](const LogitRows& got, const LogitRows& want, std::size_t, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t r = 0; r < got.size(); ++r) {
      ++rows;
      if (got[r] == want[r]) ++exact;
      EXPECT_EQ(got[r], want[r]) << what << ", row " << r << ": relative L2 "
                                 << RelativeL2(got[r], want[r].data(), graphs->vocab_size());
    }
  };
  SpeculateBoth(*graphs, *eager, {5, 16, 17, 40, 100, 300, 33, 64}, {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 3, 5, 7}, {6}}, 4,
                3, compare, 16);
  std::printf("speculative cuda graphs vs eager (captured sizes): %d of %d rows bit-identical\n", exact, rows);
}

// Padded draft extends (model/draft_batch.h) as replays against the same extends run eagerly, at
// S = 1 and S = 3: every sequence of a batch keeps a different count of drafts (its extend 1 to
// S + 1 committed rows after S + 1 - rows padding rows), batches of captured sizes (8, 4 and 1).
// The eager extend is the same padded batch (the engine pads whether or not graphs are on), so
// every row, and the draft taken from it, is bit-identical; so are the verify runs and chained
// steps around them.
TEST(CudaGraphs, DraftExtendsReplayEagerExtends) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions with_graphs = DummyV3(true), without = DummyV3(false);
  with_graphs.load_draft = without.load_draft = true;
  auto graphs = LoadCausalLM(ConfigDir(), with_graphs);
  auto eager = LoadCausalLM(ConfigDir(), without);
  for (int drafts : {1, 3}) {
    SCOPED_TRACE(drafts);
    int exact = 0, rows = 0;
    const CompareSteps compare = [&](const LogitRows& got, const LogitRows& want, std::size_t,
                                     const std::string& what) {
      ASSERT_EQ(got.size(), want.size()) << what;
      const bool extend = what.find("(extend)") != std::string::npos;
      for (std::size_t r = 0; r < got.size(); ++r) {
        EXPECT_EQ(got[r], want[r]) << what << ", row " << r << ": relative L2 "
                                   << RelativeL2(got[r], want[r].data(), graphs->vocab_size());
        if (!extend) continue;
        ++rows;
        if (got[r] == want[r]) ++exact;
        EXPECT_EQ(Argmax(got[r]), Argmax(want[r])) << what << ", row " << r << ": the draft";
      }
    };
    // drafts + 1 rounds: each sequence keeps every count once.
    SpeculateBoth(*graphs, *eager, {5, 16, 17, 40, 100, 300, 33, 64}, {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 3, 5, 7}, {6}},
                  drafts + 1, drafts, compare, 16);
    EXPECT_EQ(graphs->padded_extend_rows(), drafts + 1);
    EXPECT_GT(rows, 0);
    std::printf("padded draft extends (S = %d), cuda graphs vs eager: %d of %d rows bit-identical\n", drafts, exact,
                rows);
  }
}

// Padded verify and draft steps (5 sequences on the graph of 8, 3 on that of 4) against the eager
// steps. A padded batch splits each sequence's keys by the padded size, so a sequence whose split
// boundaries move (here the 120-token one once it passes 128 keys) sums its attention in another
// order. With FP8 weights everything else is row-independent (measured on the H200: when no
// boundary moves, all 180 rows are bit-identical), but the next layer's activation quantization
// turns that order difference into e4m3 code flips and the row moves by up to 0.36 (14 of 180 rows
// above 1e-3 on dummy weights). With bf16 weights the GEMMs also pick their kernels by the padded
// row count, and rows differ by bf16 rounding only (worst 7.8e-3, 6.7e-3 when no boundary moves).
// So the bound is asserted on bf16 weights; the FP8 model's numbers are printed. Chained draft
// steps are reported, not bounded: each reads the previous step's own hidden rows, so a difference
// compounds over the chain (measured 2026-12-03 with padded extends replayed: verify and extend rows
// within the bound, a chained step of a 3-sequence batch on the graph of 4 at 0.14 and 0.22 on the
// random-weight draft layer). The bit-identity of replays at captured sizes is pinned by
// DraftExtendsReplayEagerExtends and VerifyAndDraftStepsReplayEagerSteps.
constexpr double kPaddedSpeculativeBf16Bound = 2e-2;

TEST(CudaGraphs, PaddedVerifyAndDraftStepsStayClose) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  for (bool fp8 : {false, true}) {
    LoadOptions with_graphs = DummyV3(true, 1, fp8), without = DummyV3(false, 1, fp8);
    with_graphs.load_draft = without.load_draft = true;
    auto graphs = LoadCausalLM(ConfigDir(), with_graphs);
    auto eager = LoadCausalLM(ConfigDir(), without);
    double worst = 0.0, worst_chained = 0.0;
    int rows = 0, above = 0;
    const CompareSteps compare = [&](const LogitRows& got, const LogitRows& want, std::size_t,
                                     const std::string& what) {
      ASSERT_EQ(got.size(), want.size()) << what;
      const bool chained = what.find("(draft step") != std::string::npos;
      for (std::size_t r = 0; r < got.size(); ++r) {
        const double err = RelativeL2(got[r], want[r].data(), graphs->vocab_size());
        worst = std::max(worst, err);
        ++rows;
        above += err > kPaddedBound;
        if (chained) {
          worst_chained = std::max(worst_chained, err);
        } else if (!fp8) {
          EXPECT_LE(err, kPaddedSpeculativeBf16Bound) << what << ", row " << r;
        }
      }
    };
    SpeculateBoth(*graphs, *eager, {9, 40, 3, 70, 120, 31}, {{0, 1, 2, 3, 4}, {1, 4, 5}}, 3, 3, compare, 16);
    std::printf("padded speculative cuda graphs vs eager, %s weights: worst relative L2 %.3g (chained draft steps "
                "%.3g), %d of %d rows above %.0e\n", fp8 ? "fp8" : "bf16", worst, worst_chained, above, rows,
                kPaddedBound);
  }
}

// A second cache (other addresses) gets graphs of its own.
TEST(CudaGraphs, FollowANewCache) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  auto graphs = LoadCausalLM(ConfigDir(), DummyV3(true));
  auto eager = LoadCausalLM(ConfigDir(), DummyV3(false));
  for (int round = 0; round < 2; ++round) DecodeBoth(*graphs, *eager, {7, 30, 90, 12}, {{0, 1, 2, 3}}, 4, {4});
}

// bf16 routed experts plan on the device at decode sizes, so their steps are captured too.
TEST(CudaGraphs, Bf16ExpertReplaysEqualEagerSteps) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  auto graphs = LoadCausalLM(ConfigDir(), DummyV3(true, 1, /*fp8=*/false));
  auto eager = LoadCausalLM(ConfigDir(), DummyV3(false, 1, /*fp8=*/false));
  const Stats s = DecodeBoth(*graphs, *eager, {9, 40, 3, 70, 18}, {{0, 1, 2, 3}, {1}, {0, 2, 4}}, 4, {1, 4, 8});
  std::printf("bf16 experts, cuda graphs vs eager: %d of %d rows bit-identical\n", s.exact_rows, s.rows);
}

// fp32 routed experts cannot be captured (their per-expert GEMMs need the host to know the
// counts): the capture fails and every step runs eagerly, with the same results.
TEST(CudaGraphs, UncapturableStepsRunEagerly) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  LoadOptions with_graphs = DummyV3(true, 1, /*fp8=*/false), without = DummyV3(false, 1, /*fp8=*/false);
  with_graphs.dtype = without.dtype = "float32";
  auto graphs = LoadCausalLM(ConfigDir(), with_graphs);
  auto eager = LoadCausalLM(ConfigDir(), without);
  DecodeBoth(*graphs, *eager, {9, 40, 3, 70}, {{0, 1, 2, 3}, {1}}, 3, {1, 4});
}

// The work of a captured batch-1 decode step, FP8 and bf16 experts, at 2 and 4 layers (1 dense
// layer, then MoE layers: the difference is what two MoE layers add). Printed for docs/cuda.md;
// the bound is the count measured when the decode path was last fused, so an unfused operation
// (or a new one) shows up here.
TEST(CudaGraphs, LaunchesPerDecodeLayer) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  // Measured on an H100: 23 with FP8 experts, 21 with bf16 ones once q_a_proj and kv_a_proj_with_mqa
  // became one product and SplitLatents took both norms and the key's rope (26 and 24 at 6f7385a;
  // 32 and 30 before the residual add moved into the next norm and the shared expert into the
  // routed experts' launches; 38 with FP8 at 6cda9b4, before one-token products quantized their
  // input inside the GEMV).
  for (bool fp8 : {true, false}) {
    const int max_kernels_per_moe_layer = fp8 ? 23 : 21;
    kernels::cuda::CudaContext::CaptureCount counts[2];
    for (int i = 0; i < 2; ++i) {
      LoadOptions o = DummyV3(true, 1, fp8, 2 + 2 * i);
      o.cuda_graphs.batch_sizes = {1};
      auto model = LoadCausalLM(ConfigDir(), o);
      counts[i] = CaptureBatchOne(*model);
      ASSERT_GT(counts[i].kernels, 0) << "no batch-1 graph was captured";
    }
    const int per_layer = (counts[1].kernels - counts[0].kernels) / 2;
    std::printf("captured batch-1 decode step, %s experts: %d kernels and %d other nodes at 2 layers, %d and %d at "
                "4 layers: %d kernels and %d other nodes per MoE layer\n",
                fp8 ? "fp8" : "bf16", counts[0].kernels, counts[0].others, counts[1].kernels, counts[1].others,
                per_layer, (counts[1].others - counts[0].others) / 2);
    EXPECT_LE(per_layer, max_kernels_per_moe_layer) << (fp8 ? "fp8" : "bf16");
  }
}

// Tensor parallelism: every rank captures its own graph, NCCL collectives included.
TEST(CudaGraphs, TensorParallelReplaysEqualEager) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 GPUs, " << DeviceCount() << " here";
  auto graphs = LoadCausalLM(ConfigDir(), DummyV3(true, 2));
  auto eager = LoadCausalLM(ConfigDir(), DummyV3(false, 2));
  DecodeBoth(*graphs, *eager, {5, 40, 17, 100, 64}, {{0, 1, 2, 3}, {0, 1, 2, 3, 4}, {3}}, 6, {1, 4, 8});
}

// An eager decode step uploads its metadata once (the step-input block): no layer uploads
// positions, slots or tables again, and the MLA work list is built once per step. Printed for
// docs/cuda.md at 2 and 4 layers (the difference is what each layer adds).
TEST(CudaGraphs, AnEagerDecodeStepCopiesItsInputsOnce) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device";
  for (int layers : {2, 4}) {
    auto model = LoadCausalLM(ConfigDir(), DummyV3(false, 1, true, layers));
    auto& device = dynamic_cast<DeviceCausalLM&>(*model);
    const auto& ctx = dynamic_cast<kernels::cuda::CudaBackend&>(device.backend()).context();
    StepRunner r(*model, 16, 64, 3);
    std::vector<StepRunner::Chunk> decode;
    for (int length : {5, 40, 17, 300}) {
      const int seq = r.AddSequence();
      r.Prefill(seq, Tokens(length, 50 + length, model->vocab_size()), false);
      decode.push_back({seq, {7}});
    }
    r.Step(decode);  // the first decode step sets up what later ones reuse
    for (auto& c : decode) c.tokens = {9};
    const std::int64_t before = ctx.host_to_device_copies();
    r.Step(decode);
    const std::int64_t copies = ctx.host_to_device_copies() - before;
    std::printf("eager decode step, batch 4, %d layers: %lld host-to-device copies\n", layers,
                static_cast<long long>(copies));
    EXPECT_EQ(copies, 1) << layers << " layers";
  }
}

}  // namespace
}  // namespace fission::model
