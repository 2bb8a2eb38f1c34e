// Golden parity: the CPU reference backend against transformers' outputs for the tiny checkpoints
// (tests/fixtures/models, produced by tools/golden/make_model_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "io/safetensors.h"
#include "model/runtime/model_loader.h"
#include "model/layers/rope.h"
#include "model/step_runner_testlib.h"
#include "io/model_config.h"

namespace fission::model {
namespace {

struct Golden {
  std::vector<std::int32_t> ids;
  std::int64_t prompt_len = 0;
  std::vector<float> logits;  // [ids.size(), vocab]
};

std::vector<Golden> ReadGoldens(const io::SafetensorsFile& file, std::int64_t vocab) {
  std::vector<Golden> goldens;
  for (int i = 0; file.Find(StrCat("prompt", i, ".ids")) != nullptr; ++i) {
    Golden g;
    const Tensor ids = file.View(*file.Find(StrCat("prompt", i, ".ids")));
    for (std::int64_t j = 0; j < ids.numel(); ++j) g.ids.push_back(static_cast<std::int32_t>(ids.ptr<std::int64_t>()[j]));
    g.prompt_len = file.View(*file.Find(StrCat("prompt", i, ".prompt_len"))).ptr<std::int64_t>()[0];
    const Tensor logits = file.View(*file.Find(StrCat("prompt", i, ".logits")));
    EXPECT_EQ(logits.shape[1], vocab);
    g.logits.assign(logits.ptr<float>(), logits.ptr<float>() + logits.numel());
    goldens.push_back(std::move(g));
  }
  return goldens;
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

// Every prompt position's logits within 1e-4 relative of transformers', and its greedy
// continuation reproduced token by token through the decode path.
void ExpectPrefillAndGreedyDecodeMatch(const std::string& fixture, const LoadOptions& options = {}) {
  const std::string dir = FixtureModelDir(fixture);
  auto model = LoadCausalLM(dir, options);
  const std::int64_t vocab = model->vocab_size();
  io::SafetensorsFile golden_file(dir + "/golden.safetensors");
  const std::vector<Golden> goldens = ReadGoldens(golden_file, vocab);
  ASSERT_EQ(goldens.size(), 4u);
  double worst = 0.0;
  for (const Golden& g : goldens) {
    const int pages = static_cast<int>(g.ids.size() / 4 + 2);
    StepRunner runner(*model, /*page_size=*/4, pages, /*shuffle_seed=*/g.ids.size());
    const int seq = runner.AddSequence();
    const std::vector<std::int32_t> prompt(g.ids.begin(), g.ids.begin() + g.prompt_len);
    // Prefill: logits of every prompt position.
    std::vector<std::vector<float>> rows = runner.Prefill(seq, prompt, /*all_logits=*/true);
    for (std::int64_t p = 0; p < g.prompt_len; ++p) {
      const double err = RelativeL2(rows[p], g.logits.data() + p * vocab, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-4) << fixture << " prompt position " << p;
    }
    // Greedy decode: the argmax must reproduce transformers' continuation, token by token.
    std::int32_t next = Argmax(rows.back());
    for (std::size_t t = g.prompt_len; t < g.ids.size(); ++t) {
      ASSERT_EQ(next, g.ids[t]) << fixture << " greedy step " << t - g.prompt_len;
      const std::vector<float> step = runner.Decode(seq, next);
      const double err = RelativeL2(step, g.logits.data() + t * vocab, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, 1e-4) << fixture << " decode position " << t;
      next = Argmax(step);
    }
  }
  std::printf("%s: worst relative L2 error %.3g\n", fixture.c_str(), worst);
}

// DeepSeek-V4 (tools/golden/make_v4_goldens.py): sliding-window, CSA and HCA layers, a
// hash-routed layer, a window of 8 and index_topk 4, prompts of up to 100 tokens and 32 greedy
// steps, so the ring wraps many times and the indexer selects a true subset.
TEST(V4GoldenParity, PrefillAndGreedyDecodeMatchTransformers) { ExpectPrefillAndGreedyDecodeMatch("tiny-deepseek-v4"); }

class GoldenParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenParity, PrefillAndGreedyDecodeMatchTransformers) { ExpectPrefillAndGreedyDecodeMatch(GetParam()); }

TEST_P(GoldenParity, RopeTablesMatchTransformers) {
  const std::string dir = FixtureModelDir(GetParam());
  const io::ModelConfig config = io::LoadModelConfig(dir);
  io::SafetensorsFile golden(dir + "/golden.safetensors");
  const RopeTables rope = ComputeRope(config);
  const Tensor inv_freq = golden.View(*golden.Find("rope.inv_freq"));
  ASSERT_EQ(inv_freq.numel(), static_cast<std::int64_t>(rope.inv_freq.size()));
  for (std::size_t i = 0; i < rope.inv_freq.size(); ++i)
    EXPECT_NEAR(rope.inv_freq[i], inv_freq.ptr<float>()[i], 1e-6 * std::fabs(inv_freq.ptr<float>()[i])) << i;
  EXPECT_FLOAT_EQ(rope.attention_scaling, golden.View(*golden.Find("rope.attention_scaling")).ptr<float>()[0]);
  EXPECT_FLOAT_EQ(MlaSoftmaxScale(config), golden.View(*golden.Find("attention.softmax_scale")).ptr<float>()[0]);
}

// The FP8 checkpoint is dequantized exactly (e4m3 value × fp32 block scale) and its reference ran on
// the same dequantized weights, so the fp32 bound applies to it unchanged.
INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenParity,
                         ::testing::Values("tiny-deepseek-v3", "tiny-glm-routing", "tiny-deepseek-v3-fp8"), TestName);

// --kv-cache-dtype fp8_e4m3: every prompt position's logits against transformers' with the MLA
// latents stored in e4m3 (per-128 scales, bf16 rope). e4m3 keeps 3 mantissa bits of every key and
// value; on these random-weight fixtures that moves most rows by a few percent, and the rows where
// a token's expert choice flips at a near tie of the router much further (as with a bf16 cache,
// tests/model_cuda). Bounds from the measured values (printed; docs/architecture.md).
constexpr double kFp8KvMedian = 0.05;
constexpr double kFp8KvTypical = 0.15;
constexpr double kFp8KvOutlierFraction = 0.12;

TEST_P(GoldenParity, Fp8KvCacheStaysClose) {
  const std::string dir = FixtureModelDir(GetParam());
  LoadOptions options;
  options.kv_cache_dtype = "fp8_e4m3";
  auto model = LoadCausalLM(dir, options);
  EXPECT_EQ(model->Memory().classes[0].fields[0].dtype, DType::kF8E4M3);
  const std::int64_t vocab = model->vocab_size();
  io::SafetensorsFile golden_file(dir + "/golden.safetensors");
  std::vector<double> errors;
  for (const Golden& g : ReadGoldens(golden_file, vocab)) {
    StepRunner runner(*model, 4, static_cast<int>(g.ids.size() / 4 + 2), 3);
    const std::vector<std::vector<float>> out = runner.Prefill(runner.AddSequence(), g.ids, true);
    for (std::size_t p = 0; p < g.ids.size(); ++p) errors.push_back(RelativeL2(out[p], g.logits.data() + p * vocab, vocab));
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  const auto outliers = std::count_if(errors.begin(), errors.end(), [](double e) { return e > kFp8KvTypical; });
  std::printf("%s fp8 KV cache: median relative L2 %.3g, worst %.3g, %ld of %zu rows above %.2g\n", GetParam().c_str(),
              median, errors.back(), static_cast<long>(outliers), errors.size(), kFp8KvTypical);
  EXPECT_LE(median, kFp8KvMedian);
  EXPECT_LE(static_cast<double>(outliers), kFp8KvOutlierFraction * static_cast<double>(errors.size()));
}

// DeepSeek Sparse Attention (tools/golden/make_dsa_goldens.py): index_topk is 32 and the prompts
// reach 292 tokens, so most queries attend a true subset; tiny-glm-dsa's layers 1 and 3 are
// IndexShare layers.
class SparseGoldenParity : public ::testing::TestWithParam<std::string> {};

TEST_P(SparseGoldenParity, PrefillAndGreedyDecodeMatchTransformers) { ExpectPrefillAndGreedyDecodeMatch(GetParam()); }

// The absorbed form for every query, prefill included, is the same attention.
TEST_P(SparseGoldenParity, AbsorbedFormMatchesTransformers) {
  LoadOptions options;
  options.mla_form = "absorbed";
  ExpectPrefillAndGreedyDecodeMatch(GetParam(), options);
}

// Index keys (and the indexer's queries) in e4m3, as a bf16 KV cache stores them. A position
// whose query sees at most index_topk keys (and whose earlier positions do too) selects them all,
// so it matches exactly; later positions may select differently where two keys' scores are within
// e4m3's rounding. On these random-weight fixtures that moves the logits a lot (attention here does
// not favour the indexer's choices, as a trained model's does): the measured mean relative error
// is printed and recorded in docs/architecture.md, not bounded.
TEST_P(SparseGoldenParity, Fp8IndexKeysAreExactWhileEveryKeyIsSelected) {
  const std::string dir = FixtureModelDir(GetParam());
  LoadOptions options;
  options.index_keys = "fp8";
  auto model = LoadCausalLM(dir, options);
  const std::int64_t vocab = model->vocab_size(), topk = io::LoadModelConfig(dir).indexer->topk;
  io::SafetensorsFile golden_file(dir + "/golden.safetensors");
  double sparse_sum = 0.0;
  int sparse_rows = 0, argmax_equal = 0;
  for (const Golden& g : ReadGoldens(golden_file, vocab)) {
    StepRunner runner(*model, 4, static_cast<int>(g.ids.size() / 4 + 2), 2);
    const std::vector<std::vector<float>> out = runner.Prefill(runner.AddSequence(), g.ids, true);
    for (std::size_t p = 0; p < g.ids.size(); ++p) {
      const double err = RelativeL2(out[p], g.logits.data() + p * vocab, vocab);
      if (static_cast<std::int64_t>(p) < topk) {
        EXPECT_LE(err, 1e-4) << "position " << p << " sees every key";
        continue;
      }
      sparse_sum += err;
      ++sparse_rows;
      argmax_equal += Argmax(out[p]) == static_cast<std::int32_t>(
                                           std::max_element(g.logits.data() + p * vocab, g.logits.data() + (p + 1) * vocab) -
                                           (g.logits.data() + p * vocab));
    }
  }
  std::printf("%s fp8 index keys, sparse positions: mean relative L2 %.3g, argmax equal %d/%d\n",
              GetParam().c_str(), sparse_sum / sparse_rows, argmax_equal, sparse_rows);
}

// The fixtures are truly sparse: attending every key instead (index_topk above every prompt's
// length) moves the longest prompt's logits far from transformers'.
TEST_P(SparseGoldenParity, DenseAttentionDoesNotMatch) {
  const std::string dir = FixtureModelDir(GetParam());
  LoadOptions options;
  options.json_model_override_args = R"({"index_topk": 4096})";
  auto model = LoadCausalLM(dir, options);
  const std::int64_t vocab = model->vocab_size();
  io::SafetensorsFile golden_file(dir + "/golden.safetensors");
  const Golden g = ReadGoldens(golden_file, vocab).back();
  StepRunner runner(*model, 4, static_cast<int>(g.ids.size() / 4 + 2), 1);
  const std::vector<std::int32_t> prompt(g.ids.begin(), g.ids.begin() + g.prompt_len);
  const std::vector<std::vector<float>> rows = runner.Prefill(runner.AddSequence(), prompt, true);
  double worst = 0.0;
  for (std::int64_t p = 0; p < g.prompt_len; ++p)
    worst = std::max(worst, RelativeL2(rows[p], g.logits.data() + p * vocab, vocab));
  EXPECT_GT(worst, 1e-2) << "dense attention matches the sparse reference: the fixture does not test sparsity";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SparseGoldenParity, ::testing::Values("tiny-deepseek-v32", "tiny-glm-dsa"),
                         TestName);

}  // namespace
}  // namespace fission::model
