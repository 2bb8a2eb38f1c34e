#include "server/demo_model_testlib.h"

#include <fstream>

#include "engine/engine.h"
#include "engine/offline.h"
#include "io/generation_config.h"
#include "model/runtime/model_loader.h"
#include "server/serve_process_testlib.h"
#include "server/tokenizer_detokenizer.h"

namespace fission::server {

std::vector<Json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<Json> rows;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(Json::parse(line));
  return rows;
}

std::vector<std::string> GoldAnswers() {
  std::vector<std::string> gold;
  for (const Json& row : ReadJsonLines(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo/test.jsonl"))
    gold.push_back(row["answer"].get<std::string>());
  return gold;
}

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

std::vector<std::vector<std::int32_t>> DemoGreedyAnswers(const model::LoadOptions& options,
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

}  // namespace fission::server
