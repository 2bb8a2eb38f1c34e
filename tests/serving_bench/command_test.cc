// `fission bench` end to end: flags, dataset, run against the mock server, block and files.
#include "serving_bench/command.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "testing/mock_openai_server.h"
#include "fake_tokenizer.h"

namespace fission::serving_bench {
namespace {

std::unique_ptr<tokenizer::Tokenizer> LoadFake(const std::string& dir) {
  if (dir != "fake") Fail("no tokenizer at '", dir, "'");
  return std::make_unique<testing::FakeTokenizer>();
}

// Streams max_tokens one-letter chunks with a usage block.
MockScript EchoLengths() {
  return [](const Json& body, ApiKind api, int) {
    const std::int64_t n = api == ApiKind::kSglangGenerate ? body["sampling_params"]["max_new_tokens"].get<std::int64_t>()
                                                           : body["max_tokens"].get<std::int64_t>();
    MockReply r;
    for (std::int64_t i = 0; i < n; ++i) r.chunks.push_back({0, "a"});
    r.completion_tokens = n;
    return r;
  };
}

std::string Row(const std::string& label, const std::string& value) {
  std::string line = label;
  line.resize(40, ' ');
  line += " " + value;
  if (value.size() < 10) line.append(10 - value.size(), ' ');
  return line + "\n";
}

int RunBench(const std::vector<std::string>& args, std::string* out_text) {
  std::ostringstream out, err;
  const int rc = RunBenchCommand(args, out, err, LoadFake);
  *out_text = out.str();
  return rc;
}

TEST(BenchCommandTest, RandomDatasetRunPrintsTheBlockAndSavesResults) {
  MockOpenAiServer mock(EchoLengths());
  const std::string dir = ::testing::TempDir() + "/fission_bench_cmd";
  std::filesystem::remove_all(dir);
  std::string out;
  ASSERT_EQ(RunBench({"--backend", "openai", "--base-url", mock.url().ToString(), "--model", "m", "--tokenizer", "fake",
                      "--dataset-name", "random", "--num-prompts", "20", "--random-input-len", "32",
                      "--random-output-len", "8", "--random-range-ratio", "1", "--max-concurrency", "4",
                      "--request-rate", "inf", "--disable-tqdm", "--save-result", "--result-dir", dir,
                      "--result-filename", "r.json", "--metadata", "gpu=h200", "run=1", "--extra-request-body",
                      R"({"top_k": 5})", "--goodput", "ttft:60000", "e2el:60000", "--output-file",
                      dir + "/lines.jsonl"},
                     &out),
            0);
  EXPECT_NE(out.find("#Input tokens: 640\n#Output tokens: 160\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Warmup completed with 1 sequences. Starting main benchmark run...\n"), std::string::npos);
  for (const std::string& line :
       {Row("Backend:", "openai"), Row("Traffic request rate:", "inf"), Row("Max request concurrency:", "4"),
        Row("Successful requests:", "20"), Row("Total input tokens:", "640"), Row("Total generated tokens:", "160"),
        Row("Total generated tokens (retokenized):", "160")}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  EXPECT_NE(out.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_EQ(out.find("Failed requests"), std::string::npos);
  // 20 measured requests plus one warm-up, each carrying the extra body and ignore_eos off.
  const auto bodies = mock.bodies();
  ASSERT_EQ(bodies.size(), 21u);
  EXPECT_EQ(bodies[0]["max_tokens"], 8);  // warm-up: min(output_len, 32)
  for (const Json& b : bodies) {
    EXPECT_EQ(b["top_k"], 5);
    EXPECT_EQ(b["ignore_eos"], false);
    EXPECT_EQ(b["stream"], true);
  }
  std::ifstream f(dir + "/r.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const Json saved = ParseJson(ss.str(), "saved result");
  EXPECT_EQ(saved["gpu"], "h200");
  EXPECT_EQ(saved["run"], "1");
  EXPECT_EQ(saved["completed"], 20);
  EXPECT_EQ(saved["failed"], 0);
  EXPECT_EQ(saved["total_input_tokens"], 640);
  EXPECT_EQ(saved["total_output_tokens"], 160);
  EXPECT_EQ(saved["num_prompts"], 20);
  EXPECT_EQ(saved["max_concurrency"], 4);
  EXPECT_EQ(saved["request_rate"], "inf");
  EXPECT_EQ(saved["output_lens"].size(), 20u);
  EXPECT_EQ(saved["itls"][0].size(), 7u);
  for (const char* key : {"duration", "request_throughput", "output_throughput", "mean_ttft_ms", "median_ttft_ms",
                          "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "p95_itl_ms", "mean_e2e_latency_ms",
                          "concurrency", "request_goodput"}) {
    EXPECT_TRUE(saved.contains(key)) << key;
  }
  std::ifstream lines(dir + "/lines.jsonl");
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_EQ(ParseJson(line, "line")["completed"], 20);
}

TEST(BenchCommandTest, SglangBackendDiscoversTheModelAndReportsAcceptLength) {
  MockOpenAiServer::Options options;
  options.accept_length = 2.5;
  MockOpenAiServer mock(EchoLengths(), options);
  std::string out;
  ASSERT_EQ(RunBench({"--base-url", mock.url().ToString(), "--tokenizer", "fake", "--num-prompts", "5",
                      "--random-input-len", "16", "--random-output-len", "4", "--disable-tqdm",
                      "--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,90"},
                     &out),
            0);
  EXPECT_NE(out.find(Row("Backend:", "sglang")), std::string::npos) << out;
  EXPECT_NE(out.find(Row("Accept length:", "2.50")), std::string::npos) << out;
  EXPECT_NE(out.find("P90 TTFT (ms):"), std::string::npos);
  EXPECT_EQ(out.find("ITL"), std::string::npos);
  const Json last = mock.bodies().back();
  EXPECT_TRUE(last["sampling_params"]["ignore_eos"].get<bool>());  // bench_serving's default
  EXPECT_TRUE(last.contains("text"));
}

TEST(BenchCommandTest, JsonlDatasetWithoutTokenizer) {
  MockOpenAiServer mock(EchoLengths());
  const std::string path = ::testing::TempDir() + "/fission_bench_prompts.jsonl";
  {
    std::ofstream f(path);
    f << R"({"prompt": "hello", "prompt_len": 3, "output_len": 2})" << "\n"
      << R"({"prompt": "world", "prompt_len": 4, "output_len": 5})" << "\n";
  }
  std::string out;
  ASSERT_EQ(RunBench({"--backend", "openai-chat", "--base-url", mock.url().ToString(), "--model", "m",
                      "--dataset-name", "jsonl", "--dataset-path", path, "--num-warmups", "0", "--disable-tqdm"},
                     &out),
            0);
  EXPECT_NE(out.find(Row("Total input tokens:", "7")), std::string::npos) << out;
  EXPECT_NE(out.find(Row("Total generated tokens:", "7")), std::string::npos) << out;
  EXPECT_EQ(mock.requests_seen(), 2);
}

TEST(BenchCommandTest, BadFlagsAreErrors) {
  std::string out;
  EXPECT_EQ(RunBench({"--help"}, &out), 0);
  EXPECT_NE(out.find("--random-range-ratio"), std::string::npos);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--no-such-flag"},
           {"--backend", "tgi", "--model", "m"},
           {"--goodput", "ttft", "--model", "m"},
           {"--goodput", "itl:5", "--model", "m"},
           {"--num-prompts", "-1"},
           {"--percentile-metrics", "ttft,xyz"},
           {"--metric-percentiles", "101"},
           {"--extra-request-body", "[1]"},
           {"--dataset-name", "alpaca"},
           {"--report-format", "tgi"},
           {"--tokenize-prompt", "--dataset-name", "random"},
           {"--model", "m", "--base-url", "http://127.0.0.1:1", "--tokenizer", "missing"},
           {"--model", "m", "--base-url", "http://127.0.0.1:1"},  // random dataset, no tokenizer
       }) {
    EXPECT_THROW(RunBench(args, &out), Error) << args[0];
  }
  // An unreachable server fails the warm-up with a message naming it.
  try {
    RunBench({"--model", "m", "--base-url", "http://127.0.0.1:1", "--tokenizer", "fake", "--num-prompts", "1",
              "--random-input-len", "4", "--random-output-len", "2"},
             &out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("warm-up failed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fission::serving_bench
