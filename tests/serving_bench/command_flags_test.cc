// `fission bench`'s recipe flags end to end against the mock server: the datasets drawn as
// sglang.bench_serving draws them, token-id prompts and the file that carries them, LoRA names,
// the profiler calls, the chat template, the peak at --max-concurrency, and progress in logs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "base/error.h"
#include "fake_tokenizer.h"
#include "serving_bench/command.h"
#include "testing/mock_openai_server.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {
namespace {

std::unique_ptr<tokenizer::Tokenizer> Load(const std::string& dir) {
  if (dir == "fake") return std::make_unique<testing::FakeTokenizer>();
  return tokenizer::Tokenizer::Load(dir);
}

// Streams max_tokens one-letter chunks, 2 ms apart, with a usage block.
MockScript Echo() {
  return [](const Json& body, ApiKind api, int) {
    const Json& n = api == ApiKind::kSglangGenerate ? body["sampling_params"]["max_new_tokens"] : body["max_tokens"];
    MockReply r;
    for (std::int64_t i = 0; i < n.get<std::int64_t>(); ++i) r.chunks.push_back({2, "a"});
    r.completion_tokens = n.get<std::int64_t>();
    return r;
  };
}

// A folder of this process's own under the test temp dir.
std::string Scratch() {
  const std::string dir = ::testing::TempDir() + "/fission_bench_flags_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

struct Output {
  int rc = 0;
  std::string out, err;
};

Output Bench(const MockOpenAiServer& mock, std::vector<std::string> args) {
  args.insert(args.begin(), {"--base-url", mock.url().ToString(), "--model", "m"});
  std::ostringstream out, err;
  Output o;
  o.rc = RunBenchCommand(args, out, err, Load);
  o.out = out.str();
  o.err = err.str();
  return o;
}

TEST(BenchFlagsTest, PeakConcurrencyNeverExceedsTheLimitAndProgressIsLogged) {
  MockOpenAiServer mock(Echo());
  // --trust-remote-code is accepted as the recipes pass it.
  const Output o = Bench(mock, {"--backend", "sglang-oai", "--tokenizer", "fake", "--num-prompts", "40",
                                "--random-input-len", "8", "--random-output-len", "4", "--max-concurrency", "4",
                                "--trust-remote-code"});
  ASSERT_EQ(o.rc, 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex(R"(Peak concurrent requests:\s+(\d+))"))) << o.out;
  EXPECT_GE(std::stoi(m[1]), 1);
  EXPECT_LE(std::stoi(m[1]), 4) << o.out;
  // Standard error is not a terminal here: progress comes as lines.
  EXPECT_NE(o.err.find("progress: 40/40 requests (100%)"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find('\r'), std::string::npos);
}

TEST(BenchFlagsTest, RandomIdsWithTokenizePromptSendsTheDrawnIds) {
  MockOpenAiServer mock(Echo());
  const Output o = Bench(mock, {"--backend", "sglang", "--tokenizer", "fake", "--dataset-name", "random-ids",
                                "--tokenize-prompt", "--num-prompts", "3", "--random-input-len", "5",
                                "--random-output-len", "4", "--num-warmups", "0", "--disable-tqdm"});
  ASSERT_EQ(o.rc, 0) << o.err;
  // np.random.seed(1): input lengths [4, 5, 1], offsets [5, 15, 0] over a vocabulary of 31.
  const std::vector<Json> bodies = mock.bodies();
  ASSERT_EQ(bodies.size(), 3u);
  std::vector<Json> ids;
  for (const Json& b : bodies) ids.push_back(b["input_ids"]);
  std::sort(ids.begin(), ids.end());  // requests start concurrently
  EXPECT_EQ(ids[0], Json::array({2}));
  EXPECT_EQ(ids[1], Json::array({5, 6, 7, 8}));
  EXPECT_EQ(ids[2], Json::array({16, 17, 18, 19, 20}));
  EXPECT_NE(o.out.find("#Input tokens: 10\n"), std::string::npos) << o.out;
}

TEST(BenchFlagsTest, TokenIdPromptsOnTheChatRouteAreAnErrorBeforeAnyRequest) {
  const std::string path = Scratch() + "/ids.jsonl";
  std::ofstream(path) << R"({"prompt": "a", "prompt_len": 1})" << "\n" << R"({"prompt_ids": [1, 2]})" << "\n";
  MockOpenAiServer mock(Echo());
  try {
    Bench(mock, {"--backend", "openai-chat", "--dataset-name", "jsonl", "--dataset-path", path, "--num-warmups", "0"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("prompt 2 is token ids"), std::string::npos) << e.what();
  }
  EXPECT_EQ(mock.requests_seen(), 0);
}

TEST(BenchFlagsTest, SavedDatasetReplaysTheSameIds) {
  const std::string dir = ::testing::TempDir() + "/fission_bench_ids_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  MockOpenAiServer first(Echo());
  ASSERT_EQ(Bench(first, {"--backend", "openai", "--tokenizer", "fake", "--num-prompts", "5", "--random-input-len",
                          "6", "--random-output-len", "3", "--num-warmups", "0", "--disable-tqdm", "--save-dataset",
                          dir + "/prompts.jsonl"})
                .rc,
            0);
  MockOpenAiServer second(Echo());
  const Output o = Bench(second, {"--backend", "openai", "--dataset-name", "jsonl", "--dataset-path",
                                  dir + "/prompts.jsonl", "--num-warmups", "0", "--disable-tqdm"});
  ASSERT_EQ(o.rc, 0) << o.err;
  testing::FakeTokenizer tok;
  std::vector<Json> sent, replayed;
  for (const Json& b : first.bodies()) sent.push_back(Json(tok.Encode(b["prompt"].get<std::string>(), true)));
  for (const Json& b : second.bodies()) replayed.push_back(b["prompt"]);
  std::sort(sent.begin(), sent.end());
  std::sort(replayed.begin(), replayed.end());
  EXPECT_EQ(sent, replayed);  // the ids the text stands for, with the BOS a server adds
}

TEST(BenchFlagsTest, LoraNamesProfileAndChatTemplate) {
  MockOpenAiServer mock(Echo());
  const std::string demo = std::string(FISSION_SOURCE_DIR) + "/models/demo-deepseek-v3";
  const Output o = Bench(mock, {"--backend", "sglang-oai-chat", "--tokenizer", demo, "--num-prompts", "12",
                                "--random-input-len", "16", "--random-output-len", "3", "--disable-tqdm",
                                "--apply-chat-template", "--lora-name", "a", "b", "--profile"});
  ASSERT_EQ(o.rc, 0) << o.err;
  std::set<std::string> names;
  for (const Json& b : mock.bodies()) {
    names.insert(b["model"].get<std::string>());
    EXPECT_EQ(b["model"], b["lora_path"]);
    const std::string content = b["messages"][0]["content"];
    EXPECT_EQ(content.rfind("<|im_start|>user\n", 0), 0u) << content;  // the BOS text is dropped
    EXPECT_NE(content.find("<|im_end|>\n<|im_start|>assistant\n"), std::string::npos) << content;
  }
  EXPECT_EQ(names, (std::set<std::string>{"a", "b"}));
  // The profiler runs around the measured requests only: after the warm-up, before the results.
  EXPECT_EQ(mock.control_calls(), (std::vector<std::string>{"/start_profile@1", "/stop_profile@13"}));
  EXPECT_NE(o.out.find("Starting profiler...\nProfiler started\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("Stopping profiler...\nProfiler stopped\n"), std::string::npos) << o.out;
}

TEST(BenchFlagsTest, ShareGptFromALocalFile) {
  MockOpenAiServer mock(Echo());
  const Output o = Bench(mock, {"--backend", "openai", "--tokenizer", "fake", "--dataset-name", "sharegpt",
                                "--dataset-path", std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/bench/sharegpt_tiny.json",
                                "--num-prompts", "3", "--sharegpt-output-len", "4", "--num-warmups", "0",
                                "--disable-tqdm", "--save-result", "--result-dir", Scratch(), "--result-filename", "sharegpt.json"});
  ASSERT_EQ(o.rc, 0) << o.err;
  std::set<std::string> prompts;
  for (const Json& b : mock.bodies()) prompts.insert(b["prompt"].get<std::string>());
  EXPECT_EQ(prompts, (std::set<std::string>{"gamma", "delta", "epsilon"}));
  std::ifstream f(Scratch() + "/sharegpt.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const Json saved = ParseJson(ss.str(), "saved");
  EXPECT_EQ(saved["dataset_name"], "sharegpt");
  EXPECT_EQ(saved["sharegpt_output_len"], 4);
}

}  // namespace
}  // namespace fission::serving_bench
