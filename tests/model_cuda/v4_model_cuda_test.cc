// DeepSeek-V4 on CUDA: against transformers' outputs for the tiny fixture (fp32 weights, cache and
// activations: every V4 kernel computes in fp32 and the products run cuBLASLt's fp32 GEMM, so the
// CPU's 1e-4 bound holds and the greedy continuation is reproduced token by token), against the
// CPU backend over mixed steps (chunked prompts, prefill and decode together, the ring crossed,
// windows closed mid-chunk), with the FP8 cache, with bf16 weights, and at V4-Flash's dimensions
// with dummy weights.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "io/safetensors.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/v4_scenarios_testlib.h"

namespace fission::model {
namespace {

constexpr const char* kFixture = "tiny-deepseek-v4";
constexpr double kFp32Bound = 1e-4;  // CUDA vs transformers and vs the CPU (measured values printed)

bool HaveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

LoadOptions OnCuda() {
  LoadOptions o;
  o.device = "cuda";
  return o;
}

std::vector<double> SortedErrors(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                                 std::int64_t vocab) {
  EXPECT_EQ(got.size(), want.size());
  std::vector<double> errors;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i)
    errors.push_back(RelativeL2(got[i], want[i].data(), vocab));
  std::sort(errors.begin(), errors.end());
  return errors;
}

TEST(CudaV4Model, MatchesTransformersAtEveryPositionAndGreedyStep) {
  ASSERT_TRUE(HaveGpu()) << "no CUDA device";
  const std::string dir = FixtureModelDir(kFixture);
  LoadOptions options = OnCuda();
  options.dtype = "float32";
  auto model = LoadCausalLM(dir, options);
  const std::int64_t vocab = model->vocab_size();
  io::SafetensorsFile golden(dir + "/golden.safetensors");
  double worst = 0.0;
  int prompts = 0;
  for (int i = 0; golden.Find(StrCat("prompt", i, ".ids")) != nullptr; ++i, ++prompts) {
    const Tensor ids_t = golden.View(*golden.Find(StrCat("prompt", i, ".ids")));
    std::vector<std::int32_t> ids;
    for (std::int64_t j = 0; j < ids_t.numel(); ++j) ids.push_back(static_cast<std::int32_t>(ids_t.ptr<std::int64_t>()[j]));
    const std::int64_t prompt_len = golden.View(*golden.Find(StrCat("prompt", i, ".prompt_len"))).ptr<std::int64_t>()[0];
    const float* want = golden.View(*golden.Find(StrCat("prompt", i, ".logits"))).ptr<float>();
    StepRunner runner(*model, 4, static_cast<int>(ids.size() / 4 + 2), ids.size());
    const int seq = runner.AddSequence();
    auto rows = runner.Prefill(seq, {ids.begin(), ids.begin() + prompt_len}, /*all_logits=*/true);
    for (std::int64_t p = 0; p < prompt_len; ++p) {
      const double err = RelativeL2(rows[p], want + p * vocab, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, kFp32Bound) << "prompt " << i << " position " << p;
    }
    std::int32_t next = Argmax(rows.back());
    for (std::size_t t = prompt_len; t < ids.size(); ++t) {
      ASSERT_EQ(next, ids[t]) << "prompt " << i << " greedy step " << t - prompt_len;
      const std::vector<float> step = runner.Decode(seq, next);
      const double err = RelativeL2(step, want + t * vocab, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, kFp32Bound) << "prompt " << i << " decode position " << t;
      next = Argmax(step);
    }
  }
  EXPECT_EQ(prompts, 4);
  std::printf("cuda %s vs transformers: worst relative L2 %.3g, every greedy token reproduced\n", kFixture, worst);
}

// The mixed steps on both backends, fp32: the same greedy tokens and every row within the bound.
TEST(CudaV4Model, EqualsCpuOverMixedSteps) {
  ASSERT_TRUE(HaveGpu()) << "no CUDA device";
  auto cpu = LoadCausalLM(FixtureModelDir(kFixture));
  auto cuda = LoadCausalLM(FixtureModelDir(kFixture), OnCuda());
  std::vector<std::int32_t> want_tokens, got_tokens;
  const auto want = V4MixedScenario(*cpu, &want_tokens);
  const auto got = V4MixedScenario(*cuda, &got_tokens);
  const double worst = WorstRowError(got, want, cpu->vocab_size(), kFp32Bound);
  EXPECT_EQ(got_tokens, want_tokens);
  std::printf("cuda vs cpu, %s mixed steps: worst relative L2 %.3g over %zu rows\n", kFixture, worst, want.size());
}

// A prompt cut into chunks at arbitrary points (inside windows of 4 and of 16, across the ring of
// 8, single tokens) against the whole prompt, on CUDA: the same logits up to the products'
// summation order, which may follow the step's row count.
TEST(CudaV4Model, ChunkedPrefillLeavesOutputsUnchanged) {
  ASSERT_TRUE(HaveGpu()) << "no CUDA device";
  auto model = LoadCausalLM(FixtureModelDir(kFixture), OnCuda());
  const auto tokens = Tokens(150, 11, model->vocab_size());
  const auto whole = V4ChunkedPrefill(*model, tokens, {}, 4);
  double worst = 0.0;
  for (const auto& [chunks, page] : std::vector<std::pair<std::vector<std::size_t>, std::int64_t>>{
           {{1, 6, 3, 17, 5, 40, 28}, 4}, {{15, 1, 1, 16, 33}, 16}, {{63, 2, 50}, 32}}) {
    const auto cut = V4ChunkedPrefill(*model, tokens, chunks, page);
    worst = std::max(worst, WorstRowError(cut, whole, model->vocab_size(), 1e-5));
  }
  std::printf("cuda %s chunked against whole prefill: worst relative L2 %.3g\n", kFixture, worst);
}

// --kv-cache-dtype fp8_e4m3 on both backends: the CUDA kernels store the bytes the CPU stores
// from the same rows; rows computed in another summation order may round to a neighbouring e4m3
// code, so most rows agree closely and a few move by a code's step.
TEST(CudaV4Model, Fp8KvCacheStaysCloseToCpu) {
  ASSERT_TRUE(HaveGpu()) << "no CUDA device";
  LoadOptions cpu_options, cuda_options = OnCuda();
  cpu_options.kv_cache_dtype = cuda_options.kv_cache_dtype = "fp8_e4m3";
  auto cpu = LoadCausalLM(FixtureModelDir(kFixture), cpu_options);
  auto cuda = LoadCausalLM(FixtureModelDir(kFixture), cuda_options);
  std::vector<std::int32_t> tokens;
  const auto want = V4MixedScenario(*cpu, &tokens);
  const auto got = V4MixedScenario(*cuda, &tokens);
  const std::vector<double> errors = SortedErrors(got, want, cpu->vocab_size());
  const double median = errors[errors.size() / 2];
  std::printf("cuda vs cpu, fp8 KV: median relative L2 %.3g, worst %.3g over %zu rows\n", median, errors.back(),
              errors.size());
  EXPECT_LE(median, 1e-3);
  EXPECT_LE(errors.back(), 0.1);
}

// --dtype bfloat16: bf16 matrices and window ring, fp32 activations and mixing weights; against
// the fp32 CPU, most rows within bf16's rounding. The indexer's keys are kept exact (beside a
// bf16 cache they default to e4m3, whose selections differ at near ties: a different bound).
TEST(CudaV4Model, Bf16WeightsStayCloseToCpu) {
  ASSERT_TRUE(HaveGpu()) << "no CUDA device";
  LoadOptions options = OnCuda();
  options.dtype = "bfloat16";
  options.index_keys = "exact";
  auto cpu = LoadCausalLM(FixtureModelDir(kFixture));
  auto cuda = LoadCausalLM(FixtureModelDir(kFixture), options);
  std::vector<std::int32_t> tokens;
  const auto want = V4MixedScenario(*cpu, &tokens);
  const auto got = V4MixedScenario(*cuda, &tokens);
  const std::vector<double> errors = SortedErrors(got, want, cpu->vocab_size());
  const double median = errors[errors.size() / 2];
  std::printf("cuda bf16 vs cpu fp32: median relative L2 %.3g, worst %.3g over %zu rows\n", median, errors.back(),
              errors.size());
  EXPECT_LE(median, 2.5e-2);
}

// V4-Flash's dimensions (head_dim 512, 64 heads, window 128, CSA at ratio 4 with index_topk 512,
// HCA at 128, hash-routed first layers), four layers and 32 experts of dummy bf16 weights: a
// 3,000-token prefill (truly sparse: 750 CSA entries for 512 picks) and decode steps run finite.
TEST(CudaV4Model, FlashDimensionsRunWithDummyWeights) {
  ASSERT_TRUE(HaveGpu()) << "no CUDA device";
  LoadOptions options = OnCuda();
  options.dtype = "bfloat16";
  options.load_format = "dummy";
  options.json_model_override_args = R"({"num_hidden_layers": 4, "n_routed_experts": 32})";
  auto model = LoadCausalLM(std::string(FISSION_SOURCE_DIR) + "/bench/configs/deepseek-v4-flash", options);
  StepRunner runner(*model, 256, 16, 1);
  const int seq = runner.AddSequence();
  auto rows = runner.Prefill(seq, Tokens(3000, 5, model->vocab_size()), false);
  for (int t = 0; t < 4; ++t) rows.push_back(runner.Decode(seq, Argmax(rows.back())));
  for (const auto& row : rows)
    for (float v : row) ASSERT_TRUE(std::isfinite(v));
  std::printf("deepseek-v4-flash (4 layers, 32 experts, dummy bf16): prefill of 3000 tokens and 4 decode steps ran\n");
}

}  // namespace
}  // namespace fission::model
