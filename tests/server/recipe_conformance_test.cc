// Recipe conformance: every SGLang launch command of tests/fixtures/recipes/recipes.json, with
// `python3 -m sglang.launch_server` replaced by `fission serve` and the checkpoint by a committed
// test model of its model_type, either starts (and answers a request) or is refused before loading
// with every missing piece it names in one message. Besides the checkpoint, only the port (a free
// one) and the device (the CPU, so that no recipe depends on this host's GPUs) are changed, and a
// config-only checkpoint gets dummy weights and the demo model's tokenizer.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

std::string SourceDir() { return FISSION_SOURCE_DIR; }

Json Recipes() {
  std::ifstream in(SourceDir() + "/tests/fixtures/recipes/recipes.json");
  std::stringstream text;
  text << in.rdbuf();
  return ParseJson(text.str(), "tests/fixtures/recipes/recipes.json");
}

// The recipe's words with {model} resolved and --port taken out (ServeProcess picks a free one).
// A config-only checkpoint runs on dummy weights and reads the demo model's tokenizer.
std::vector<std::string> CommandWords(const Json& recipe, const Json& models) {
  const std::string model = SourceDir() + "/" + models.at(recipe.at("model_type").get<std::string>()).get<std::string>();
  std::istringstream in(recipe.at("command").get<std::string>());
  std::vector<std::string> words;
  for (std::string w; in >> w;) {
    if (w == "--port") {
      in >> w;
      continue;
    }
    words.push_back(w == "{model}" ? model : w);
  }
  // The test models run on the CPU whatever GPUs this host has: the check is of the flags, and
  // a TP8 recipe must not depend on eight GPUs being here.
  words.push_back("--device");
  words.push_back("cpu");
  if (!std::filesystem::exists(model + "/model.safetensors")) {
    words.push_back("--load-format");
    words.push_back("dummy");
  }
  if (!std::filesystem::exists(model + "/tokenizer.json")) {
    words.push_back("--tokenizer-path");
    words.push_back(DemoModelDir());
  }
  return words;
}

TEST(RecipeConformance, EveryRecipeStartsOrIsRefusedNamingWhatIsMissing) {
  const Json all = Recipes();
  ASSERT_GE(all.at("recipes").size(), 10u);
  int started = 0, refused = 0;
  for (const Json& recipe : all.at("recipes")) {
    const std::string name = recipe.at("name");
    SCOPED_TRACE(name);
    for (const auto& [key, value] : recipe.at("env").items()) ::setenv(key.c_str(), value.get<std::string>().c_str(), 1);
    std::string error;
    int status = 0;
    try {
      ServeProcess server(CommandWords(recipe, all.at("models")));
      status = Post(server.port(), "/v1/completions", R"({"prompt":"Question: 1+1?\nAnswer:","max_tokens":2})").status;
      EXPECT_EQ(server.Stop(), 0);
    } catch (const Error& e) {
      error = e.what();
    }
    for (const auto& [key, value] : recipe.at("env").items()) ::unsetenv(key.c_str());
    const Json& expect = recipe.at("expect");
    if (expect == "start") {
      EXPECT_EQ(error, "") << "expected to start";
      EXPECT_EQ(status, 200);
      ++started;
      continue;
    }
    ASSERT_FALSE(error.empty()) << "expected a refusal, but it started";
    for (const Json& part : expect.at("refused"))
      EXPECT_NE(error.find(part.get<std::string>()), std::string::npos) << "'" << part << "' missing from: " << error;
    ++refused;
  }
  std::printf("recipes: %d start, %d refused as expected\n", started, refused);
}

}  // namespace
}  // namespace fission::server
