// `fission eval` end to end against the scripted mock server answering from gsm8k-format data:
// the demo model's held-out problems (committed), and real gsm8k when ../shared has it.
#include <unistd.h>

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

// The project's own gsm8k-format data (the demo model's held-out problems and few-shot pool).
std::string DataDir() { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/demo"; }

// Real gsm8k lives next to the repository, never inside it; tests that need it skip without it.
std::string RealGsm8kDir() { return std::string(FISSION_SOURCE_DIR) + "/../shared/datasets/gsm8k"; }
bool HaveRealGsm8k() { return std::filesystem::exists(RealGsm8kDir() + "/test.jsonl"); }

// The newest file in `dir` whose name starts with `prefix`.
std::string Newest(const std::string& dir, const std::string& prefix) {
  std::string best;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && (best.empty() || e.path().string() > best)) best = e.path().string();
  }
  return best;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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
  const auto test = LoadGsm8k(DataDir() + "/test.jsonl");
  ASSERT_EQ(test.size(), 500u);
  MockOpenAiServer mock(Answering(test, [](const std::string& gold, int) { return gold; }));
  std::string out;
  const int rc = RunEval({"--base-url", mock.url().ToString(), "--data-dir", DataDir(), "--num-concurrent", "32",
                      "--threshold", "1.0", "--disable-tqdm"},
                     &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(mock.requests_seen(), 500);
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

TEST(EvalMockTest, RealGsm8kTestSplitScoresOne) {
  if (!HaveRealGsm8k()) GTEST_SKIP() << "no gsm8k data at " << RealGsm8kDir() << " (test.jsonl, train.jsonl)";
  const auto test = LoadGsm8k(RealGsm8kDir() + "/test.jsonl");
  ASSERT_EQ(test.size(), 1319u);
  MockOpenAiServer mock(Answering(test, [](const std::string& gold, int) { return gold; }));
  std::string out;
  EXPECT_EQ(RunEval({"--base-url", mock.url().ToString(), "--data-dir", RealGsm8kDir(), "--num-concurrent", "32",
                     "--threshold", "1.0", "--disable-tqdm"},
                    &out),
            0)
      << out;
  EXPECT_EQ(mock.requests_seen(), 1319);
}

TEST(EvalMockTest, MixedAnswersScoreAsComputedByHand) {
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
  const std::string dir = ::testing::TempDir() + "/fission_eval_out_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  std::string out, err;
  const int rc = RunEval({"--base-url", mock.url().ToString(), "--model", "m", "--data-dir", DataDir(), "--limit", "20",
                      "--num-fewshot", "3", "--num-concurrent", "4", "--output-path", dir + "/r.json", "--log-samples",
                      "--threshold", "0.8", "--disable-tqdm"},
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
  // Results JSON and the per-sample log, where lm-eval writes them for --output_path r.json.
  const std::string results = Newest(dir, "r_");
  ASSERT_FALSE(results.empty());
  const Json j = ParseJson(ReadText(results), "results");
  EXPECT_DOUBLE_EQ(j["results"]["gsm8k"]["exact_match,strict-match"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["results"]["gsm8k"]["exact_match,flexible-extract"].get<double>(), 0.75);
  EXPECT_NEAR(j["results"]["gsm8k"]["exact_match_stderr,strict-match"].get<double>(), 0.114707866, 1e-8);
  EXPECT_EQ(j["n-shot"]["gsm8k"], 3);
  EXPECT_EQ(j["n-samples"]["gsm8k"]["effective"], 20);
  // One line per filter and document: strict-match's 20, then flexible-extract's.
  std::ifstream samples(Newest(dir, "samples_gsm8k_"));
  std::string line;
  int n = 0;
  while (std::getline(samples, line)) {
    const Json s = ParseJson(line, "sample");
    const int doc = n % 20;
    EXPECT_EQ(s["doc_id"], doc);
    EXPECT_EQ(s["filter"], n < 20 ? "strict-match" : "flexible-extract");
    if (n < 20) {
      EXPECT_EQ(s["exact_match"], (doc % 4 == 0 || doc % 4 == 3) ? 1.0 : 0.0) << n;
      if (doc % 4 == 1) {
        EXPECT_EQ(s["filtered_resps"][0], "[invalid]");
      }
    }
    ++n;
  }
  EXPECT_EQ(n, 40);
}

TEST(EvalMockTest, ChatModeMultiturnAndModelDiscovery) {
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
  unsetenv("FISSION_GSM8K_DIR");
  EXPECT_THROW(RunEval({"--base-url", "http://127.0.0.1:1"}, &out), Error);  // no --data-dir
  EXPECT_THROW(RunEval({"--limit", "zero", "--data-dir", "x"}, &out), Error);
  EXPECT_THROW(RunEval({"--fewshot-as-multiturn", "--data-dir", "x"}, &out), Error);
  EXPECT_EQ(RunEval({"--help"}, &out), 0);
  EXPECT_NE(out.find("--num-fewshot"), std::string::npos);
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
  const std::vector<std::string>& stops = Gsm8kStops();
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"text":"#### 18\n\nQuestion: next"}]})", false, stops), "#### 18\n\n");
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"message":{"role":"assistant","content":"42</s>x"}}]})", true, stops), "42");
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"message":{"role":"assistant","content":null}}]})", true, stops), "");
  EXPECT_EQ(ParseEvalResponse(R"({"choices":[{"text":"1 END 2"}]})", false, {"END"}), "1 ");
  EXPECT_THROW(ParseEvalResponse(R"({"choices":[]})", false, stops), Error);
  EXPECT_THROW(ParseEvalResponse("not json", false, stops), Error);
}

}  // namespace
}  // namespace fission::eval
