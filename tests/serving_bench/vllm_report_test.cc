// The block of vLLM's benchmark_serving and the result file's keys, against
// tests/fixtures/bench/vllm_result_block.txt (rendered with its format strings from the scenario's
// metrics) and the key lists of both reference writers.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "fake_tokenizer.h"
#include "serving_bench/backend.h"
#include "serving_bench/command.h"
#include "serving_bench/report.h"
#include "scenario.h"

namespace fission::serving_bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Fixture(const std::string& name) { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/bench/" + name; }

std::vector<std::string> Keys(const std::string& fixture) {
  std::vector<std::string> keys;
  std::stringstream ss(ReadFile(Fixture(fixture)));
  for (std::string line; std::getline(ss, line);) {
    if (!line.empty() && line[0] != '#') keys.push_back(line);
  }
  return keys;
}

// The scenario's successful requests as the report test measures them, built from its numbers.
BenchmarkMetrics ScenarioMetrics() {
  auto done = [](double start, double ttft, double latency, std::vector<double> itl, std::int64_t tokens,
                 std::int64_t prompt) {
    RequestOutput o;
    o.success = true;
    o.start_time = start;
    o.ttft = ttft;
    o.latency = latency;
    o.itl = std::move(itl);
    o.usage_output_tokens = tokens;
    o.prompt_len = prompt;
    return o;
  };
  std::vector<RequestOutput> outs = {done(0.0, 0.1, 0.25, {0.05, 0.05, 0.05}, 4, 10),
                                     done(0.01, 0.2, 0.32, {0.1}, 5, 20),
                                     done(1.2, 0.05, 0.05, {}, 1, 30),
                                     done(1.5, 0.06, 0.12, {0.03, 0.03}, 3, 60)};
  return CalculateMetrics(outs, 2.0, nullptr, Goodput{});
}

TEST(VllmReportTest, BlockMatchesTheReferenceLineByLine) {
  ReportConfig c;
  c.backend = "vllm";
  c.duration_s = 2.0;
  c.percentile_metrics = {"ttft", "tpot", "itl", "e2el"};
  EXPECT_EQ(FormatVllmResultBlock(c, ScenarioMetrics()), ReadFile(Fixture("vllm_result_block.txt")));
  // vLLM's defaults: ttft, tpot and itl at P99; goodput adds its row.
  c.percentile_metrics.clear();
  c.goodput = true;
  const std::string block = FormatVllmResultBlock(c, ScenarioMetrics());
  EXPECT_EQ(block.find("End-to-end Latency"), std::string::npos);
  EXPECT_NE(block.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_NE(block.find("P99 ITL (ms):"), std::string::npos);
}

MockScript FourTokens() {
  return [](const Json&, ApiKind, int) {
    MockReply r;
    for (int i = 0; i < 4; ++i) r.chunks.push_back({1, "a"});
    r.completion_tokens = 4;
    return r;
  };
}

TEST(VllmReportTest, SavedResultHoldsEveryKeyOfBothWriters) {
  MockOpenAiServer mock(FourTokens());
  const std::string dir = ::testing::TempDir() + "/fission_bench_keys_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::ostringstream out, err;
  ASSERT_EQ(RunBenchCommand({"--backend", "sglang-oai", "--base-url", mock.url().ToString(), "--model", "m",
                             "--tokenizer", "fake", "--num-prompts", "6", "--random-input-len", "8",
                             "--random-output-len", "4", "--max-concurrency", "2", "--disable-tqdm", "--report-format",
                             "vllm", "--save-result", "--result-dir", dir, "--result-filename", "r.json"},
                            out, err,
                            [](const std::string&) { return std::make_unique<testing::FakeTokenizer>(); }),
            0);
  EXPECT_NE(out.str().find("Total Token throughput (tok/s):"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("Total token throughput (tok/s):"), std::string::npos) << out.str();
  const Json saved = ParseJson(ReadFile(dir + "/r.json"), "saved result");
  for (const char* list : {"sglang_result_keys.txt", "vllm_result_keys.txt"}) {
    const std::vector<std::string> keys = Keys(list);
    EXPECT_GT(keys.size(), 30u) << list;
    for (const std::string& k : keys) EXPECT_TRUE(saved.contains(k)) << list << ": " << k;
  }
  EXPECT_DOUBLE_EQ(saved["mean_e2el_ms"].get<double>(), saved["mean_e2e_latency_ms"].get<double>());
  EXPECT_DOUBLE_EQ(saved["total_token_throughput"].get<double>(), saved["total_throughput"].get<double>());
  EXPECT_EQ(saved["completed"], 6);
  EXPECT_LE(saved["max_concurrent_requests"].get<int>(), 2);
}

}  // namespace
}  // namespace fission::serving_bench
