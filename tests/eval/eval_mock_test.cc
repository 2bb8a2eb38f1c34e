// `fission eval` end to end against the scripted mock server answering from the gsm8k data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "testing/mock_openai_server.h"
#include "eval/command.h"
#include "eval/gsm8k.h"
#include "eval/runner.h"

namespace fission::eval {
namespace {

using serving_bench::ApiKind;
using serving_bench::MockOpenAiServer;
using serving_bench::MockReply;

// gsm8k lives next to the repository, never inside it.
std::string DataDir() { return std::string(FISSION_SOURCE_DIR) + "/../shared/datasets/gsm8k"; }

bool HaveData() { return std::filesystem::exists(DataDir() + "/test.jsonl"); }

// The question of the last "Question: ...\nAnswer:" in a prompt or chat request.
std::string LastQuestion(const Json& body) {
  const std::string text = body.contains("prompt") ? body["prompt"].get<std::string>()
                                                   : body["messages"].back()["content"].get<std::string>();
  const size_t q = text.rfind("Question: ");
  const size_t a = text.rfind("\nAnswer:");
  return text.substr(q + 10, a - q - 10);
}

// Answers each test question: `answer(gold, index_in_test)`.
serving_bench::MockScript Answering(const std::vector<Gsm8kDoc>& test,
                            std::function<std::string(const std::string&, int)> answer) {
  auto index = std::make_shared<std::unordered_map<std::string, int>>();
  for (size_t i = 0; i < test.size(); ++i) index->emplace(test[i].question, static_cast<int>(i));
  return [index, test, answer](const Json& body, ApiKind, int) {
    MockReply r;
    auto it = index->find(LastQuestion(body));
    const std::string text = it == index->end() ? "I do not know." : answer(test[it->second].answer, it->second);
    r.chunks = {{0, text}};
    r.completion_tokens = 1;
    return r;
  };
}

int RunEval(const std::vector<std::string>& args, std::string* out_text, std::string* err_text = nullptr) {
  std::ostringstream out, err;
  const int rc = RunEvalCommand(args, out, err);
  *out_text = out.str();
  if (err_text) *err_text = err.str();
  return rc;
}

TEST(EvalMockTest, GoldAnswersScoreOneOnEveryTestQuestion) {
  if (!HaveData()) GTEST_SKIP() << "no gsm8k data at " << DataDir();
  const auto test = LoadGsm8k(DataDir() + "/test.jsonl");
  ASSERT_EQ(test.size(), 1319u);
  MockOpenAiServer mock(Answering(test, [](const std::string& gold, int) { return gold; }));
  std::string out;
  const int rc = RunEval({"--base-url", mock.url().ToString(), "--data-dir", DataDir(), "--num-concurrent", "32",
                      "--threshold", "1.0", "--disable-tqdm"},
                     &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(mock.requests_seen(), 1319);
  EXPECT_NE(out.find("|gsm8k|      3|flexible-extract|     5|exact_match|↑  |    1|±  |     0|\n"
                     "|     |       |strict-match    |     5|exact_match|↑  |    1|±  |     0|\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("local-completions (model=mock-model,"), std::string::npos) << out;
  // Requests as lm-eval sends them.
  const Json body = mock.bodies().front();
  EXPECT_EQ(body["max_tokens"], 256);
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["stop"], Json::array({"Question:", "</s>", "<|im_end|>"}));
  EXPECT_EQ(body["model"], "mock-model");
}

TEST(EvalMockTest, MixedAnswersScoreAsComputedByHand) {
  if (!HaveData()) GTEST_SKIP() << "no gsm8k data at " << DataDir();
  const auto test = LoadGsm8k(DataDir() + "/test.jsonl");
  // i % 4 == 0, 3: the gold solution; 1: the solution with "#### N" rewritten as "The answer is N."
  // (strict-match finds nothing, flexible-extract finds N); 2: a wrong "#### 99999".
  MockOpenAiServer mock(Answering(test, [](const std::string& gold, int i) {
    const size_t hashes = gold.rfind("#### ");
    switch (i % 4) {
      case 1:
        return gold.substr(0, hashes) + "The answer is " + gold.substr(hashes + 5) + ".";
      case 2:
        return gold.substr(0, hashes) + "#### 99999";
      default:
        return gold;
    }
  }));
  const std::string dir = ::testing::TempDir() + "/fission_eval_out";
  std::filesystem::remove_all(dir);
  std::string out, err;
  const int rc = RunEval({"--base-url", mock.url().ToString(), "--model", "m", "--data-dir", DataDir(), "--limit", "20",
                      "--num-fewshot", "3", "--num-concurrent", "4", "--output-path", dir + "/r.json", "--threshold",
                      "0.8", "--disable-tqdm"},
                     &out, &err);
  // strict: 10/20 correct; flexible: 15/20. Stderr = sqrt(sum((x - mean)^2) / 19) / sqrt(20):
  // strict sqrt(5 / 19) / sqrt(20) = 0.1147, flexible sqrt(3.75 / 19) / sqrt(20) = 0.0993.
  EXPECT_NE(out.find("|gsm8k|      3|flexible-extract|     3|exact_match|↑  | 0.75|±  |0.0993|\n"
                     "|     |       |strict-match    |     3|exact_match|↑  | 0.50|±  |0.1147|\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(rc, 1);  // 0.75 < 0.8
  EXPECT_NE(err.find("below the threshold"), std::string::npos);
  EXPECT_NE(out.find("limit: 20.0, num_fewshot: 3"), std::string::npos) << out;
  // Results JSON and the per-sample log.
  std::ifstream results(dir + "/r.json");
  std::stringstream rs;
  rs << results.rdbuf();
  const Json j = ParseJson(rs.str(), "results");
  EXPECT_DOUBLE_EQ(j["results"]["gsm8k"]["exact_match,strict-match"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["results"]["gsm8k"]["exact_match,flexible-extract"].get<double>(), 0.75);
  EXPECT_NEAR(j["results"]["gsm8k"]["exact_match_stderr,strict-match"].get<double>(), 0.114707866, 1e-8);
  EXPECT_EQ(j["n-shot"]["gsm8k"], 3);
  EXPECT_EQ(j["n-samples"]["gsm8k"]["effective"], 20);
  std::ifstream samples(dir + "/r_samples_gsm8k.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(samples, line)) {
    const Json s = ParseJson(line, "sample");
    EXPECT_EQ(s["doc_id"], n);
    const double strict = s["exact_match"]["strict-match"];
    EXPECT_EQ(strict, (n % 4 == 0 || n % 4 == 3) ? 1.0 : 0.0) << n;
    if (n % 4 == 1) EXPECT_EQ(s["filtered_resps"]["strict-match"], "[invalid]");
    ++n;
  }
  EXPECT_EQ(n, 20);
}

TEST(EvalMockTest, ChatModeMultiturnAndModelDiscovery) {
  if (!HaveData()) GTEST_SKIP() << "no gsm8k data at " << DataDir();
  const auto test = LoadGsm8k(DataDir() + "/test.jsonl");
  MockOpenAiServer mock(Answering(test, [](const std::string& gold, int) { return gold + "\n\nQuestion: more?"; }));
  std::string out;
  EXPECT_EQ(RunEval({"--base-url", mock.url().ToString(), "--data-dir", DataDir(), "--limit", "10",
                 "--apply-chat-template", "--fewshot-as-multiturn", "--disable-tqdm"},
                &out),
            0);
  EXPECT_NE(out.find("local-chat-completions (model=mock-model,"), std::string::npos) << out;
  EXPECT_NE(out.find("|gsm8k|      3|flexible-extract|     5|exact_match|↑  |    1|±  |     0|"), std::string::npos)
      << out;
  const Json body = mock.bodies().front();
  ASSERT_TRUE(body.contains("messages"));
  EXPECT_EQ(body["messages"].size(), 11u);  // five exemplar pairs and the question
  EXPECT_EQ(body["messages"][1]["role"], "assistant");
}

TEST(EvalMockTest, FlagAndServerErrors) {
  std::string out;
  EXPECT_THROW(RunEval({"--bogus"}, &out), Error);
  EXPECT_THROW(RunEval({"--base-url", "http://127.0.0.1:1"}, &out), Error);  // no --data-dir
  EXPECT_THROW(RunEval({"--limit", "zero", "--data-dir", "x"}, &out), Error);
  EXPECT_THROW(RunEval({"--fewshot-as-multiturn", "--data-dir", "x"}, &out), Error);
  EXPECT_EQ(RunEval({"--help"}, &out), 0);
  EXPECT_NE(out.find("--num-fewshot"), std::string::npos);
  if (!HaveData()) return;
  // A server that keeps failing: the run stops with an error naming the document.
  MockOpenAiServer failing([](const Json&, ApiKind, int) {
    MockReply r;
    r.status = 500;
    return r;
  });
  try {
    RunEval({"--base-url", failing.url().ToString(), "--model", "m", "--data-dir", DataDir(), "--limit", "2",
         "--disable-tqdm"},
        &out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gsm8k doc"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("HTTP 500"), std::string::npos) << e.what();
  }
  EXPECT_EQ(failing.requests_seen(), 2 * 4);  // each tried once and retried three times
}

TEST(EvalResponseTest, CutsAtStopStringsAndReadsChat) {
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"text":"#### 18\n\nQuestion: next"}]})", false), "#### 18\n\n");
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"message":{"role":"assistant","content":"42</s>x"}}]})", true), "42");
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"message":{"role":"assistant","content":null}}]})", true), "");
  EXPECT_THROW(ParseEvalResponse(R"({"choices":[]})", false), Error);
  EXPECT_THROW(ParseEvalResponse("not json", false), Error);
}

}  // namespace
}  // namespace fission::eval
