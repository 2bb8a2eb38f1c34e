// The bundled demo model gives the same greedy answers to held-out questions whatever the parallel
// layout: one rank, tensor parallelism over 2 and 4 ranks, prefill context parallelism within
// them, data-parallel attention and expert parallelism (ranks are threads on the CPU). The first kParityPrompts questions keep each layout's test
// to seconds on a loaded two-core machine; the score over all 500 is `fission eval`'s
// (docs/demo_model.md).
#include <gtest/gtest.h>

#include "eval/filters.h"
#include "model/runtime/model_loader.h"
#include "server/demo_model_testlib.h"
#include "server/serve_process_testlib.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {
namespace {

// Held-out questions each test decodes (three-shot prompts of about 300 tokens).
constexpr std::size_t kParityPrompts = 16;

std::vector<std::vector<std::int32_t>> GreedyAnswers(const model::LoadOptions& options,
                                                     const tokenizer::Tokenizer& tokenizer,
                                                     const std::vector<std::vector<std::int32_t>>& prompts) {
  return DemoGreedyAnswers(options, tokenizer, prompts);
}

// The first kParityPrompts prompts, encoded.
std::vector<std::vector<std::int32_t>> ParityPrompts(const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::vector<std::int32_t>> prompts;
  for (const std::string& text : ThreeShotPrompts()) prompts.push_back(tokenizer.Encode(text, true));
  EXPECT_EQ(prompts.size(), 500u);
  prompts.resize(kParityPrompts);
  return prompts;
}

TEST(DemoModel, OneRankAnswersTheHeldOutQuestions) {
  auto tokenizer = tokenizer::Tokenizer::Load(DemoModelDir());
  const auto answers = GreedyAnswers(model::LoadOptions{}, *tokenizer, ParityPrompts(*tokenizer));
  // The answers are right: gsm8k's flexible-extract on the held-out set, as `fission eval` scores it.
  const std::vector<std::string> gold = GoldAnswers();
  int correct = 0;
  for (std::size_t i = 0; i < answers.size(); ++i)
    correct += eval::ExactMatch(eval::FlexibleExtract(tokenizer->Decode(answers[i], true)), gold[i]);
  EXPECT_GE(correct, static_cast<int>(kParityPrompts) - 1) << "flexible-extract " << correct << " / " << answers.size();
  std::printf("demo model, one rank: flexible-extract %d / %zu\n", correct, answers.size());
}

struct Layout {
  int tp, cp;
  int dp = 1, ep = 1;
};

// One layout per test, so that each runs (and times out) on its own and CTest can run them side
// by side.
class DemoModelLayout : public ::testing::TestWithParam<Layout> {};

TEST_P(DemoModelLayout, GreedyAnswersEqualOneRanks) {
  auto tokenizer = tokenizer::Tokenizer::Load(DemoModelDir());
  const auto prompts = ParityPrompts(*tokenizer);
  const auto want = GreedyAnswers(model::LoadOptions{}, *tokenizer, prompts);
  model::LoadOptions options;
  options.tp_size = GetParam().tp;
  options.attn_cp_size = GetParam().cp;
  options.dp_size = GetParam().dp;
  options.enable_dp_attention = GetParam().dp > 1;
  options.ep_size = GetParam().ep;
  options.pcp_min_tokens = 16;  // split every prefill, so context parallelism really runs
  const auto got = GreedyAnswers(options, *tokenizer, prompts);
  int differing = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 0) << "tp " << GetParam().tp << " cp " << GetParam().cp << " dp " << GetParam().dp << " ep "
                          << GetParam().ep << ": " << differing << " of " << want.size()
                          << " answers differ from one rank";
}

INSTANTIATE_TEST_SUITE_P(Layouts, DemoModelLayout,
                         ::testing::Values(Layout{2, 1}, Layout{4, 1}, Layout{2, 2}, Layout{4, 2},
                                           Layout{4, 2, 2, 4}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           std::string name = "tp" + std::to_string(info.param.tp) + "_cp" + std::to_string(info.param.cp);
                           if (info.param.dp > 1) name += "_dp" + std::to_string(info.param.dp);
                           if (info.param.ep > 1) name += "_ep" + std::to_string(info.param.ep);
                           return name;
                         });

}  // namespace
}  // namespace fission::server
