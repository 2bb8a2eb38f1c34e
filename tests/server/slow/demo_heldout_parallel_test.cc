// The demo model answers all 500 held-out problems identically under data-parallel attention with
// expert parallelism (tp 4, dp 2, ep 4: two attention groups of two ranks, each rank holding two
// of the eight routed experts) and on one rank. The default suite checks 16 of them per layout
// (tests/server/demo_model_test.cc).
#include <gtest/gtest.h>

#include "eval/filters.h"
#include "server/demo_model_testlib.h"
#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

TEST(DemoHeldOutParallel, AllFiveHundredAnswersEqualOneRanks) {
  auto tokenizer = tokenizer::Tokenizer::Load(DemoModelDir());
  std::vector<std::vector<std::int32_t>> prompts;
  for (const std::string& text : ThreeShotPrompts()) prompts.push_back(tokenizer->Encode(text, true));
  ASSERT_EQ(prompts.size(), 500u);
  const auto want = DemoGreedyAnswers(model::LoadOptions{}, *tokenizer, prompts);
  model::LoadOptions options;
  options.tp_size = 4;
  options.enable_dp_attention = true;
  options.dp_size = 2;
  options.ep_size = 4;
  const auto got = DemoGreedyAnswers(options, *tokenizer, prompts);
  const std::vector<std::string> gold = GoldAnswers();
  int differing = 0, correct = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    differing += got[i] != want[i];
    correct += eval::ExactMatch(eval::FlexibleExtract(tokenizer->Decode(got[i], true)), gold[i]);
  }
  EXPECT_EQ(differing, 0) << differing << " of 500 answers differ from one rank";
  std::printf("demo model, tp 4 dp 2 ep 4: %d of 500 answers differ from one rank; flexible-extract %d / 500\n",
              differing, correct);
}

}  // namespace
}  // namespace fission::server
