// The tools against `fission serve` on the bundled demo model: `fission eval --limit 20` and a
// short `fission bench`, over real HTTP to a real engine.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "base/error.h"
#include "base/json.h"
#include "common/child_process.h"
#include "serving_bench/command.h"
#include "eval/command.h"
#include "tokenizer/tokenizer.h"

namespace fission::eval {
namespace {

std::string DemoModel() { return std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3"; }

// `fission serve --port 0` on the demo model, CPU; stopped with SIGTERM.
class Serve {
 public:
  Serve() {
    const testing_util::Child child = testing_util::SpawnWithLog(
        {std::string(FISSION_BINARY_DIR) + "/fission", "serve", "--model-path", DemoModel(), "--port", "0", "--device",
         "cpu"},
        "fission_tools_serve");
    pid_ = child.pid;
    port_ = testing_util::WaitForListeningPort(child, 120);
  }
  ~Serve() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 3000 && ::waitpid(pid_, &status, WNOHANG) == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (::waitpid(pid_, &status, WNOHANG) == 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

std::string Row(const std::string& label, const std::string& value) {
  std::string line = label;
  line.resize(40, ' ');
  line += " " + value;
  if (value.size() < 10) line.append(10 - value.size(), ' ');
  return line + "\n";
}

TEST(ToolsAgainstServeTest, EvalLimit20AndBench) {
  if (!std::filesystem::exists(DemoModel() + "/config.json")) GTEST_SKIP() << "no demo model";
  Serve serve;
  const std::string dir = ::testing::TempDir() + "/fission_tools_serve_eval_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  const std::string out_path = dir + "/run.json";
  std::ostringstream out, err;
  const int rc = RunEvalCommand({"--base-url", serve.url(), "--data-dir", std::string(FISSION_SOURCE_DIR) +
                                 "/tests/fixtures/demo", "--limit", "20", "--num-fewshot", "3", "--num-concurrent", "4",
                                 "--output-path", out_path, "--disable-tqdm"},
                                out, err);
  EXPECT_EQ(rc, 0) << err.str();
  EXPECT_NE(out.str().find("|gsm8k|      3|flexible-extract|     3|exact_match|"), std::string::npos) << out.str();
  // lm-eval's place for --output_path run.json: run_<date>.json beside it.
  std::string results_path;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("run_", 0) == 0) results_path = e.path().string();
  }
  ASSERT_FALSE(results_path.empty()) << "no results in " << dir;
  std::ifstream in(results_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const Json results = ParseJson(ss.str(), "results");
  EXPECT_EQ(results["n-samples"]["gsm8k"]["effective"], 20);
  const double flexible = results["results"]["gsm8k"]["exact_match,flexible-extract"];
  EXPECT_GE(flexible, 0.0);
  EXPECT_LE(flexible, 1.0);

  std::ostringstream bout, berr;
  const int brc = serving_bench::RunBenchCommand(
      {"--backend", "sglang-oai", "--base-url", serve.url(), "--tokenizer", DemoModel(), "--num-prompts", "16",
       "--random-input-len", "32", "--random-output-len", "8", "--random-range-ratio", "1", "--max-concurrency",
       "4", "--ignore-eos", "--disable-tqdm"},
      bout, berr, [](const std::string& dir) { return tokenizer::Tokenizer::Load(dir); });
  EXPECT_EQ(brc, 0);
  const std::string b = bout.str();
  EXPECT_NE(b.find(Row("Successful requests:", "16")), std::string::npos) << b;
  // The demo tokenizer's re-encoding does not always settle on exactly 32 tokens within the fitting
  // rounds; the block must report the lengths the dataset measured.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(b, m, std::regex(R"(#Input tokens: (\d+))"))) << b;
  const int input_tokens = std::stoi(m[1]);
  EXPECT_GE(input_tokens, 16 * 32 - 16);
  EXPECT_LE(input_tokens, 16 * 32 + 32);
  EXPECT_NE(b.find(Row("Total input tokens:", m[1])), std::string::npos) << b;
  EXPECT_NE(b.find(Row("Total generated tokens:", "128")), std::string::npos) << b;
  EXPECT_EQ(b.find("Failed requests"), std::string::npos) << b;
}

}  // namespace
}  // namespace fission::eval
