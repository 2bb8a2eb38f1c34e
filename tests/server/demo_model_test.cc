// The bundled demo model gives the same greedy answers to held-out questions whatever the parallel
// layout: one rank, tensor parallelism over 2 and 4 ranks, and prefill context parallelism within
// them (ranks are threads on the CPU). The first kParityPrompts questions keep each layout's test
// to seconds on a loaded two-core machine; the score over all 500 is `fission eval`'s
// (docs/demo_model.md).
#include <gtest/gtest.h>

#include <fstream>

#include "base/json.h"
#include "engine/engine.h"
#include "engine/offline.h"
#include "io/generation_config.h"
#include "eval/filters.h"
#include "model/runtime/model_loader.h"
#include "server/serve_process_testlib.h"
#include "server/tokenizer_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace fission::server {
namespace {

std::vector<Json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(Json::parse(line));
  return rows;
}

// Held-out questions each test decodes (three-shot prompts of about 300 tokens).
constexpr std::size_t kParityPrompts = 16;

// The gold answers ("#### N" lines) of the held-out problems.
std::vector<std::string> GoldAnswers() {
  std::vector<std::string> gold;
  for (const Json& row : ReadJsonLines(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo/test.jsonl"))
    gold.push_back(row["answer"].get<std::string>());
  return gold;
}

// lm-eval's gsm8k prompt: three exemplars, then the question.
std::vector<std::string> ThreeShotPrompts() {
  const std::string dir = std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo/";
  const std::vector<Json> train = ReadJsonLines(dir + "train.jsonl");
  std::string shots;
  for (int i = 0; i < 3; ++i)
    shots += "Question: " + train[i]["question"].get<std::string>() + "\nAnswer: " +
             train[i]["answer"].get<std::string>() + "\n\n";
  std::vector<std::string> prompts;
  for (const Json& row : ReadJsonLines(dir + "test.jsonl"))
    prompts.push_back(shots + "Question: " + row["question"].get<std::string>() + "\nAnswer:");
  return prompts;
}

std::vector<std::vector<std::int32_t>> GreedyAnswers(const model::LoadOptions& options,
                                                     const tokenizer::Tokenizer& tokenizer,
                                                     const std::vector<std::vector<std::int32_t>>& prompts) {
  auto model = model::LoadCausalLM(DemoModelDir(), options);
  engine::EngineConfig config;
  config.max_running_requests = 512;
  config.max_total_tokens = 262144;
  config.eos_token_ids = io::ReadEosTokenIds(DemoModelDir());
  TokenizerDetokenizer detokenizer(tokenizer);
  engine::Engine engine(model.get(), config, &detokenizer);
  engine::SamplingParams params;
  params.temperature = 0.0;
  params.max_new_tokens = 96;
  // Completion mode ends each answer by starting a new question, as lm-eval's stop list expects.
  params.stop = {"Question:"};
  std::vector<engine::OfflinePrompt> offline;
  for (const auto& p : prompts) offline.push_back({p, params});
  const engine::OfflineReport report = engine::RunOffline(engine, offline);
  std::vector<std::vector<std::int32_t>> answers;
  for (const auto& outputs : report.outputs) answers.push_back(outputs[0].token_ids);
  return answers;
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
  options.pcp_min_tokens = 16;  // split every prefill, so context parallelism really runs
  const auto got = GreedyAnswers(options, *tokenizer, prompts);
  int differing = 0;
  for (std::size_t i = 0; i < want.size(); ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 0) << "tp " << GetParam().tp << " cp " << GetParam().cp << ": " << differing << " of "
                          << want.size() << " answers differ from one rank";
}

INSTANTIATE_TEST_SUITE_P(Layouts, DemoModelLayout,
                         ::testing::Values(Layout{2, 1}, Layout{4, 1}, Layout{2, 2}, Layout{4, 2}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return "tp" + std::to_string(info.param.tp) + "_cp" + std::to_string(info.param.cp);
                         });

}  // namespace
}  // namespace fission::server
