// DeepSeek-V4 on the CPU beyond the golden parity (golden_parity_test.cc): the sliding-window
// ring, the compressors' carry-over and the indexer give the same bits however a prompt is cut
// into chunks and whatever else shares the step; every TP x CP layout (prefill steps split
// round-robin over the CP group) equals one rank.
#include <gtest/gtest.h>

#include <algorithm>

#include "io/model_config.h"
#include "model/arch/deepseek_v4.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"
#include "model/v4_scenarios_testlib.h"

namespace fission::model {
namespace {

constexpr const char* kFixture = "tiny-deepseek-v4";
// The fp8 KV cache against the exact one (measured, docs/architecture.md).
constexpr double kV4Fp8Median = 0.10;
constexpr double kV4Fp8Worst = 0.6;

std::unique_ptr<CausalLM> LoadV4(const LoadOptions& options = {}) {
  return LoadCausalLM(FixtureModelDir(kFixture), options);
}

TEST(DeepseekV4, ChunkedPrefillAtAnyCutGivesTheSameBits) {
  auto model = LoadV4();
  const auto tokens = Tokens(150, 11, model->vocab_size());
  const auto whole = V4ChunkedPrefill(*model, tokens, {}, 4);
  // Cuts inside windows of 4 and of 16, across the ring of 8, and single-token steps.
  for (const auto& [chunks, page] : std::vector<std::pair<std::vector<std::size_t>, std::int64_t>>{
           {{1, 6, 3, 17, 5, 40, 28}, 4}, {{15, 1, 1, 16, 33}, 16}, {{2, 2, 2, 9, 31, 7}, 8}, {{63, 2, 50}, 32}, {{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 4}}) {
    const auto cut = V4ChunkedPrefill(*model, tokens, chunks, page);
    ASSERT_EQ(cut.size(), whole.size());
    for (std::size_t p = 0; p < whole.size(); ++p) ASSERT_EQ(cut[p], whole[p]) << "position " << p << " page " << page;
  }
}

// Four sequences whose prompts and decode tokens share steps in every combination against each
// alone: the same bits (the CPU reference's results do not depend on the batch).
TEST(DeepseekV4, BatchCompositionLeavesOutputsUnchanged) {
  auto model = LoadV4();
  const std::int64_t vocab = model->vocab_size();
  const std::vector<std::vector<std::int32_t>> prompts = {Tokens(37, 1, vocab), Tokens(70, 2, vocab),
                                                          Tokens(5, 3, vocab), Tokens(129, 4, vocab)};
  std::vector<std::vector<std::vector<float>>> alone;
  for (const auto& p : prompts) alone.push_back(V4ChunkedPrefill(*model, p, {}, 4));

  StepRunner runner(*model, 4, 256, 3);
  std::vector<int> seqs;
  for (std::size_t i = 0; i < prompts.size(); ++i) seqs.push_back(runner.AddSequence());
  std::vector<std::vector<std::vector<float>>> together(prompts.size());
  auto run = [&](const std::vector<std::pair<std::size_t, std::pair<std::size_t, std::size_t>>>& parts) {
    std::vector<StepRunner::Chunk> chunks;
    for (const auto& [s, range] : parts)
      chunks.push_back({seqs[s], {prompts[s].begin() + range.first, prompts[s].begin() + range.second}});
    const auto rows = runner.Step(chunks);
    std::size_t r = 0;
    for (const auto& [s, range] : parts)
      for (std::size_t k = range.first; k < range.second; ++k) together[s].push_back(rows[r++]);
  };
  run({{0, {0, 20}}, {1, {0, 1}}, {3, {0, 64}}});
  run({{0, {20, 37}}, {1, {1, 2}}, {2, {0, 5}}, {3, {64, 65}}});
  run({{1, {2, 70}}, {3, {65, 129}}});
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    ASSERT_EQ(together[s].size(), alone[s].size());
    for (std::size_t p = 0; p < alone[s].size(); ++p) ASSERT_EQ(together[s][p], alone[s][p]) << "sequence " << s << " position " << p;
  }
}

class V4Layouts : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(V4Layouts, EqualSingleRank) {
  const auto [tp, cp] = GetParam();
  auto single = LoadV4();
  LoadOptions options;
  options.tp_size = tp;
  options.attn_cp_size = cp;
  options.pcp_min_tokens = 2;  // split every prefill step, however short
  auto parallel = LoadV4(options);
  std::vector<std::int32_t> want_tokens, got_tokens;
  const auto want = V4MixedScenario(*single, &want_tokens);
  const auto got = V4MixedScenario(*parallel, &got_tokens);
  const double worst = WorstRowError(got, want, single->vocab_size(), 1e-5);
  EXPECT_EQ(got_tokens, want_tokens);
  std::printf("tiny-deepseek-v4 tp %d cp %d: worst relative L2 %.3g\n", tp, cp, worst);
}

INSTANTIATE_TEST_SUITE_P(CpuLocal, V4Layouts,
                         ::testing::Values(std::pair{2, 1}, std::pair{2, 2}, std::pair{4, 2}, std::pair{4, 4}, std::pair{1, 1}),
                         [](const auto& info) { return StrCat("tp", info.param.first, "_cp", info.param.second); });

// Paged bytes per token at V4-Flash's dims: fp8 keys and entries 3845, bf16 ones with e4m3 index
// keys (their default) 6229, and with exact fp32 index keys (the parity mode) 8224.
TEST(DeepseekV4, Fp8HoldsMoreTokensPerByteAtFlashDims) {
  const io::ModelConfig flash = io::LoadModelConfig(std::string(FISSION_SOURCE_DIR) + "/bench/configs/deepseek-v4-flash");
  auto bytes = [&](kernels::V4KvFormat format, kernels::IndexKeyFormat keys) {
    return V4MemorySpec(flash, format, keys, DType::kBF16).bytes_per_token(256);
  };
  const double fp8 = bytes(kernels::V4KvFormat::kFp8, kernels::IndexKeyFormat::kFp8);
  const double bf16 = bytes(kernels::V4KvFormat::kExact, kernels::IndexKeyFormat::kFp8);
  const double exact = bytes(kernels::V4KvFormat::kExact, kernels::IndexKeyFormat::kExact);
  EXPECT_DOUBLE_EQ(fp8, 21 * (583.0 / 4 + 132.0 / 4) + 20 * 583.0 / 128);
  EXPECT_DOUBLE_EQ(bf16, 21 * (1024.0 / 4 + 132.0 / 4) + 20 * 1024.0 / 128);
  EXPECT_DOUBLE_EQ(exact, 21 * (1024.0 / 4 + 128 * 4.0 / 4) + 20 * 1024.0 / 128);
  EXPECT_GT(exact / fp8, 2.0);
}

// V4-Pro's: 30 CSA layers (entries and index keys at a quarter of the tokens) and 31 HCA layers,
// no sliding-only layer; what `fission model inspect bench/configs/deepseek-v4-pro` prints.
TEST(DeepseekV4, DeclaresProMemoryPerToken) {
  const io::ModelConfig pro = io::LoadModelConfig(std::string(FISSION_SOURCE_DIR) + "/bench/configs/deepseek-v4-pro");
  auto bytes = [&](kernels::V4KvFormat format) {
    return V4MemorySpec(pro, format, kernels::IndexKeyFormat::kFp8, DType::kBF16).bytes_per_token(256);
  };
  EXPECT_DOUBLE_EQ(bytes(kernels::V4KvFormat::kFp8), 30 * (583.0 / 4 + 132.0 / 4) + 31 * 583.0 / 128);
  EXPECT_DOUBLE_EQ(bytes(kernels::V4KvFormat::kExact), 30 * (1024.0 / 4 + 132.0 / 4) + 31 * 1024.0 / 128);
}

// DP attention and EP have not landed for V4: refused by name before any weight is read.
TEST(DeepseekV4, DataParallelAttentionAndExpertParallelismAreRefusedByName) {
  for (auto [dp, ep] : {std::pair{2, 1}, std::pair{1, 2}}) {
    LoadOptions options;
    options.tp_size = 2;
    options.dp_size = dp;
    options.enable_dp_attention = dp > 1;
    options.ep_size = ep;
    try {
      LoadV4(options);
      ADD_FAILURE() << "dp " << dp << " ep " << ep << " loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("have not landed for DeepSeek-V4"), std::string::npos) << e.what();
    }
  }
}

// The memory the model declares: a window ring per layer and request, CSA's entries and index keys
// at a quarter of the tokens, HCA's at a sixteenth, the compressors' carry-over per request.
TEST(DeepseekV4, DeclaresItsMemoryClasses) {
  auto model = LoadV4();
  const MemorySpec spec = model->Memory();
  ASSERT_EQ(spec.classes.size(), 7u);
  auto cls = [&](const char* name) { return spec.classes[spec.index_of(name)]; };
  EXPECT_EQ(cls("v4_window").kind, CacheKind::kPerRequest);
  EXPECT_EQ(cls("v4_window").entries_per_request, 8);
  EXPECT_EQ(cls("v4_window").layers, 4);
  EXPECT_EQ(cls("v4_csa_entries").tokens_per_entry, 4);
  EXPECT_EQ(cls("v4_csa_entries").layers, 2);
  EXPECT_EQ(cls("v4_csa_index_keys").fields[0].count, 16);
  EXPECT_EQ(cls("v4_csa_state").entries_per_request, 8);          // two windows of 4
  EXPECT_EQ(cls("v4_csa_state").fields[0].count, 2 * 2 * 32);     // kv and gate, both halves
  EXPECT_EQ(cls("v4_hca_entries").tokens_per_entry, 16);
  EXPECT_EQ(cls("v4_hca_state").entries_per_request, 16);
  EXPECT_EQ(cls("v4_hca_state").fields[0].count, 2 * 32);
  // Paged bytes per token: CSA entries (32 fp32 / 4) and keys (16 / 4) in two layers, HCA (32 / 16).
  EXPECT_DOUBLE_EQ(spec.bytes_per_token(16), (2 * (32.0 + 16.0) / 4 + 32.0 / 16) * 4);
  // What `fission model inspect` reports from the config alone is what the loaded model declares.
  const MemorySpec from_config = V4MemorySpec(io::LoadModelConfig(FixtureModelDir(kFixture)), kernels::V4KvFormat::kExact,
                                              kernels::IndexKeyFormat::kExact, DType::kF32);
  ASSERT_EQ(from_config.classes.size(), spec.classes.size());
  for (std::size_t i = 0; i < spec.classes.size(); ++i) {
    EXPECT_EQ(from_config.classes[i].name, spec.classes[i].name);
    EXPECT_EQ(from_config.classes[i].entry_bytes(), spec.classes[i].entry_bytes()) << spec.classes[i].name;
  }
}

// --kv-cache-dtype fp8_e4m3: window keys and entries stored as e4m3 nope values with ue8m0 block
// scales and bf16 rope values, the indexer's keys as e4m3 with a per-key scale. The step's own
// keys are rounded the same way before attention, so
// chunking still gives the same bits; against the exact golden the logits move by the rounding
// (bounds from the measured values, printed).
TEST(DeepseekV4, Fp8KvCacheIsChunkInvariantAndStaysClose) {
  LoadOptions options;
  options.kv_cache_dtype = "fp8_e4m3";
  auto model = LoadV4(options);
  const MemorySpec spec = model->Memory();
  const CacheClass& window = spec.classes[spec.index_of("v4_window")];
  ASSERT_EQ(window.fields.size(), 3u);
  EXPECT_EQ(window.entry_bytes(), 24u + 1u + 2u * 8u);  // 24 e4m3 nope values, one scale, 8 bf16 rope values
  EXPECT_EQ(spec.classes[spec.index_of("v4_csa_entries")].entry_bytes(), window.entry_bytes());
  EXPECT_EQ(spec.classes[spec.index_of("v4_csa_index_keys")].entry_bytes(), 16u + 4u);  // e4m3 key and its scale
  const auto tokens = Tokens(150, 11, model->vocab_size());
  const auto whole = V4ChunkedPrefill(*model, tokens, {}, 4);
  const auto cut = V4ChunkedPrefill(*model, tokens, {1, 6, 3, 17, 5, 40, 28}, 16);
  for (std::size_t p = 0; p < whole.size(); ++p) ASSERT_EQ(cut[p], whole[p]) << "position " << p;
  auto exact = LoadV4();
  const auto want = V4ChunkedPrefill(*exact, tokens, {}, 4);
  std::vector<double> errors;
  for (std::size_t p = 0; p < want.size(); ++p) errors.push_back(RelativeL2(whole[p], want[p].data(), model->vocab_size()));
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2], worst = errors.back();
  std::printf("tiny-deepseek-v4 fp8 KV against exact: median relative L2 %.3g, worst %.3g\n", median, worst);
  EXPECT_GT(median, 0.0);  // the rounding is real
  EXPECT_LE(median, kV4Fp8Median);
  EXPECT_LE(worst, kV4Fp8Worst);
}

}  // namespace
}  // namespace fission::model
