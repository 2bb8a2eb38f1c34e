// `fission generate` end to end, through the built binary (skipped when it has not been built).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>

#include "base/json.h"
#include "io/safetensors.h"

namespace fission::engine {
namespace {

const std::string kBinary = std::string(FISSION_BINARY_DIR) + "/fission";
const std::string kModel = std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3";

struct Result {
  int exit_code = -1;
  std::string out;
};

Result RunFission(const std::string& args) {
  Result r;
  FILE* pipe = popen((kBinary + " " + args + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) r.out.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::vector<std::vector<std::int64_t>> Golden(std::vector<std::int64_t>* prompt_lens) {
  io::SafetensorsFile file(kModel + "/golden.safetensors");
  std::vector<std::vector<std::int64_t>> ids;
  for (int i = 0; file.Find(StrCat("prompt", i, ".ids")) != nullptr; ++i) {
    const Tensor t = file.View(*file.Find(StrCat("prompt", i, ".ids")));
    ids.emplace_back(t.ptr<std::int64_t>(), t.ptr<std::int64_t>() + t.numel());
    prompt_lens->push_back(file.View(*file.Find(StrCat("prompt", i, ".prompt_len"))).ptr<std::int64_t>()[0]);
  }
  return ids;
}

std::string Join(const std::vector<std::int64_t>& v, std::size_t begin, std::size_t end) {
  std::string s;
  for (std::size_t i = begin; i < end; ++i) s += (i > begin ? "," : "") + std::to_string(v[i]);
  return s;
}

class GenerateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kBinary)) GTEST_SKIP() << kBinary << " is not built";
  }
};

TEST_F(GenerateCommandTest, PromptIdsPrintTheGreedyIds) {
  std::vector<std::int64_t> lens;
  const auto golden = Golden(&lens);
  for (std::size_t i = 0; i < golden.size(); ++i) {
    const std::size_t new_tokens = golden[i].size() - lens[i];
    const Result r = RunFission("generate --model-path " + kModel + " --prompt-ids " + Join(golden[i], 0, lens[i]) +
                         " --max-new-tokens " + std::to_string(new_tokens) + " --chunked-prefill-size 7");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, Join(golden[i], lens[i], golden[i].size()) + "\n") << "prompt " << i;
  }
}

TEST_F(GenerateCommandTest, InputFileRunsEveryLine) {
  std::vector<std::int64_t> lens;
  const auto golden = Golden(&lens);
  const std::string path = ::testing::TempDir() + "/generate_input.jsonl";
  {
    std::ofstream f(path);
    for (std::size_t i = 0; i < golden.size(); ++i)
      f << "{\"input_ids\": [" << Join(golden[i], 0, lens[i]) << "], \"sampling_params\": {\"max_new_tokens\": "
        << golden[i].size() - lens[i] << ", \"ignore_eos\": true}}\n";
  }
  const Result r = RunFission("generate --model-path " + kModel + " --input " + path + " --max-total-tokens 256");
  ASSERT_EQ(r.exit_code, 0);
  std::size_t line_start = 0, line = 0;
  while (line_start < r.out.size()) {
    const std::size_t end = r.out.find('\n', line_start);
    const Json j = ParseJson(r.out.substr(line_start, end - line_start), "output");
    const std::size_t index = j["index"].get<std::size_t>();
    ASSERT_LT(index, golden.size());
    EXPECT_EQ(j["output_ids"].get<std::vector<std::int64_t>>(),
              std::vector<std::int64_t>(golden[index].begin() + lens[index], golden[index].end()));
    line_start = end + 1;
    ++line;
  }
  EXPECT_EQ(line, golden.size());
}

// --warmup runs the first prompt once beforehand: the same output ids, and the summary counts the
// timed run's prompt and steps only.
TEST_F(GenerateCommandTest, WarmupLeavesOutputsAndCountsUnchanged) {
  std::vector<std::int64_t> lens;
  const auto golden = Golden(&lens);
  const std::size_t new_tokens = golden[0].size() - lens[0];
  const std::string args = "generate --model-path " + kModel + " --prompt-ids " + Join(golden[0], 0, lens[0]) +
                           " --max-new-tokens " + std::to_string(new_tokens) + " --warmup";
  const Result r = RunFission(args);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, Join(golden[0], lens[0], golden[0].size()) + "\n");
  FILE* pipe = popen((kBinary + " " + args + " 2>&1 >/dev/null").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string err;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) err.append(buffer, n);
  pclose(pipe);
  const std::string prompt = std::to_string(lens[0]);
  EXPECT_NE(err.find("prompt tokens: " + prompt + " (computed " + prompt + ", from the prefix cache 0)"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("prefill: " + prompt + " tokens"), std::string::npos) << err;
}

TEST_F(GenerateCommandTest, UserErrorsExitWithCode2) {
  EXPECT_EQ(RunFission("generate --model-path " + kModel + " --prompt-ids 1,x").exit_code, 2);
  EXPECT_EQ(RunFission("generate --prompt-ids 1,2").exit_code, 2);
  EXPECT_EQ(RunFission("generate --model-path " + kModel + " --prompt-ids 1 --max-running-requests 0").exit_code, 2);
  EXPECT_EQ(RunFission("generate --model-path " + kModel + " --prompt-ids 1 --temperature -1").exit_code, 2);
  EXPECT_EQ(RunFission("generate --model-path " + kModel + " --prompt-ids 1 --bogus 3").exit_code, 2);
}

TEST_F(GenerateCommandTest, TextPromptsWithTheModelsTokenizerAndStopStrings) {
  const std::string demo = std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3";
  if (!std::filesystem::exists(demo + "/tokenizer.json")) GTEST_SKIP() << "no demo model";
  const std::string path = ::testing::TempDir() + "/generate_text.jsonl";
  auto write = [&](const std::string& sampling) {
    std::ofstream f(path);
    f << "{\"text\": \"Question: Tom has 3 apples and buys 4 more. How many apples does he have?\\nAnswer:\", "
         "\"sampling_params\": {" << sampling << "}}\n";
  };
  write("\"max_new_tokens\": 24, \"ignore_eos\": true");
  const Result first = RunFission("generate --model-path " + demo + " --input " + path);
  ASSERT_EQ(first.exit_code, 0);
  const Json a = ParseJson(first.out, "output");
  const std::string text = a["text"].get<std::string>();
  ASSERT_GE(text.size(), 8u);
  EXPECT_EQ(a["output_ids"].size(), 24u);
  // Stop at a piece of that text: the output is the text before it, reported as a stop.
  const std::string stop = text.substr(text.size() / 2, 3);
  write("\"max_new_tokens\": 24, \"ignore_eos\": true, \"stop\": " + Json(stop).dump());
  const Result second = RunFission("generate --model-path " + demo + " --input " + path);
  ASSERT_EQ(second.exit_code, 0);
  const Json b = ParseJson(second.out, "output");
  EXPECT_EQ(b["text"].get<std::string>(), text.substr(0, text.find(stop)));
  EXPECT_EQ(b["finish_reason"], "stop");
}

}  // namespace
}  // namespace fission::engine
