// Properties of the model runner contract that hold for any weights: the two MLA forms agree,
// prefill equals token-by-token decode, and a sequence's logits do not depend on its batch.
#include <gtest/gtest.h>

#include <random>

#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

std::vector<std::int32_t> RandomTokens(std::size_t n, std::uint64_t seed, std::int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % vocab);
  return ids;
}

class Invariance : public ::testing::TestWithParam<std::string> {};

// One long prefill (expanded form) versus a short prefill followed by token-by-token decode
// (absorbed form): the same logits within 1e-5 relative.
TEST_P(Invariance, PrefillFormEqualsAbsorbedDecodeForm) {
  auto model = LoadCausalLM(FixtureModelDir(GetParam()));
  // Longer than the DSA fixtures' index_topk (32), so that their decode steps select too.
  const auto tokens = RandomTokens(90, 7, model->vocab_size());
  StepRunner whole(*model, 8, 32, 1);
  const auto full = whole.Prefill(whole.AddSequence(), tokens, true);
  StepRunner split(*model, 8, 32, 2);
  const int seq = split.AddSequence();
  auto rows = split.Prefill(seq, {tokens.begin(), tokens.begin() + 5}, true);
  for (std::size_t i = 5; i < tokens.size(); ++i) rows.push_back(split.Decode(seq, tokens[i]));
  ASSERT_EQ(rows.size(), full.size());
  for (std::size_t p = 0; p < rows.size(); ++p)
    EXPECT_LE(RelativeL2(rows[p], full[p].data(), model->vocab_size()), 1e-5) << "position " << p;
}

// Forcing either form for the whole computation gives the same logits within 1e-5.
TEST_P(Invariance, ExpandedAndAbsorbedFormsAgree) {
  LoadOptions expanded_options, absorbed_options;
  expanded_options.mla_form = "expanded";
  absorbed_options.mla_form = "absorbed";
  auto expanded = LoadCausalLM(FixtureModelDir(GetParam()), expanded_options);
  auto absorbed = LoadCausalLM(FixtureModelDir(GetParam()), absorbed_options);
  const auto tokens = RandomTokens(60, 11, expanded->vocab_size());
  StepRunner a(*expanded, 4, 16, 3), b(*absorbed, 4, 16, 4);
  const auto ra = a.Prefill(a.AddSequence(), tokens, true);
  const auto rb = b.Prefill(b.AddSequence(), tokens, true);
  for (std::size_t p = 0; p < ra.size(); ++p)
    EXPECT_LE(RelativeL2(ra[p], rb[p].data(), expanded->vocab_size()), 1e-5) << "position " << p;
}

// A sequence alone versus batched with sequences of other lengths (some prefilling, some
// decoding): bit-identical logits.
TEST_P(Invariance, LogitsAreBitIdenticalWhateverTheBatch) {
  auto model = LoadCausalLM(FixtureModelDir(GetParam()));
  const std::int64_t vocab = model->vocab_size();
  const auto target = RandomTokens(45, 21, vocab);
  StepRunner alone(*model, 4, 64, 5);
  const int a = alone.AddSequence();
  auto alone_rows = alone.Prefill(a, target, true);
  alone_rows.push_back(alone.Decode(a, 42));

  StepRunner mixed(*model, 4, 64, 6);
  const int other1 = mixed.AddSequence(), t = mixed.AddSequence(), other2 = mixed.AddSequence();
  mixed.Prefill(other1, RandomTokens(9, 1, vocab), false);
  auto rows = mixed.Step({{other1, {3}}, {t, target}, {other2, RandomTokens(30, 2, vocab)}});
  std::vector<std::vector<float>> mixed_rows(rows.begin() + 1, rows.begin() + 1 + target.size());
  rows = mixed.Step({{other2, RandomTokens(3, 4, vocab)}, {t, {42}}, {other1, {5}}});
  mixed_rows.push_back(rows[3]);
  ASSERT_EQ(mixed_rows.size(), alone_rows.size());
  for (std::size_t p = 0; p < alone_rows.size(); ++p)
    EXPECT_EQ(mixed_rows[p], alone_rows[p]) << "position " << p << " differs in a mixed batch";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Invariance,
                         ::testing::Values("tiny-deepseek-v3", "tiny-glm-routing", "tiny-deepseek-v32", "tiny-glm-dsa"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// DeepSeek-V4 from its config alone (--load-format dummy): weights drawn by their shapes, the
// hash-routing table filled, a prompt crossing windows of every ratio runs to finite logits.
TEST(Registry, DeepseekV4RunsFromDummyWeights) {
  LoadOptions options;
  options.load_format = "dummy";
  auto model = LoadCausalLM(FixtureModelDir("tiny-deepseek-v4"), options);
  EXPECT_EQ(model->architecture(), "DeepseekV4ForCausalLM");
  StepRunner runner(*model, 16, 8, 1);
  const auto rows = runner.Prefill(runner.AddSequence(), Tokens(40, 2, model->vocab_size()), true);
  ASSERT_EQ(rows.size(), 40u);
  for (float v : rows.back()) ASSERT_TRUE(std::isfinite(v));
}

TEST(Registry, DummyWeightsRunFromConfigAlone) {
  LoadOptions options;
  options.load_format = "dummy";
  options.json_model_override_args = R"({"num_hidden_layers": 2})";
  auto model = LoadCausalLM(FixtureModelDir("tiny-deepseek-v3"), options);
  StepRunner runner(*model, 4, 8, 1);
  const auto rows = runner.Prefill(runner.AddSequence(), {1, 2, 3}, true);
  ASSERT_EQ(rows.size(), 3u);
  for (float v : rows[2]) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace
}  // namespace fission::model
