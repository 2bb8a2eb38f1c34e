#include "eval/gsm8k.h"

#include <gtest/gtest.h>

#include <fstream>

#include "base/error.h"

namespace fission::eval {
namespace {

std::vector<Gsm8kDoc> Docs(const std::string& tag, int n) {
  std::vector<Gsm8kDoc> docs;
  for (int i = 0; i < n; ++i) docs.push_back({tag + "q" + std::to_string(i), tag + "a" + std::to_string(i) + "\n#### " + std::to_string(i)});
  return docs;
}

std::string Shot(const Gsm8kDoc& d) { return "Question: " + d.question + "\nAnswer: " + d.answer + "\n\n"; }

TEST(Gsm8kPromptTest, FewshotFromTrainWithLmEvalSampling) {
  const auto train = Docs("train-", 30);
  const auto test = Docs("test-", 3);
  PromptOptions o;
  o.num_fewshot = 3;
  const auto reqs = BuildGsm8kRequests(train, test, o);
  ASSERT_EQ(reqs.size(), 3u);
  // random.Random(1234): [r.sample(range(30), 3) for _ in range(3)] == [[24, 14, 3], [0, 2, 29], [25, 18, 1]]
  EXPECT_EQ(reqs[0].prompt, Shot(train[24]) + Shot(train[14]) + Shot(train[3]) + "Question: test-q0\nAnswer:");
  EXPECT_EQ(reqs[1].prompt, Shot(train[0]) + Shot(train[2]) + Shot(train[29]) + "Question: test-q1\nAnswer:");
  EXPECT_EQ(reqs[2].prompt, Shot(train[25]) + Shot(train[18]) + Shot(train[1]) + "Question: test-q2\nAnswer:");
  EXPECT_EQ(reqs[2].doc_id, 2);
  EXPECT_TRUE(reqs[0].messages.empty());
}

TEST(Gsm8kPromptTest, ZeroShotLimitAndChatForms) {
  const auto train = Docs("train-", 30);
  const auto test = Docs("test-", 10);
  PromptOptions o;
  o.num_fewshot = 0;
  o.limit = 4;
  auto reqs = BuildGsm8kRequests(train, test, o);
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[3].prompt, "Question: test-q3\nAnswer:");

  o.num_fewshot = 3;
  o.limit = 1;
  o.chat = true;
  reqs = BuildGsm8kRequests(train, test, o);
  ASSERT_EQ(reqs[0].messages.size(), 1u);  // one user turn holding exemplars and question
  EXPECT_EQ(reqs[0].messages[0].role, "user");
  EXPECT_EQ(reqs[0].messages[0].content, reqs[0].prompt);

  o.fewshot_as_multiturn = true;
  reqs = BuildGsm8kRequests(train, test, o);
  ASSERT_EQ(reqs[0].messages.size(), 7u);
  EXPECT_EQ(reqs[0].messages[0].role, "user");
  EXPECT_EQ(reqs[0].messages[0].content, "Question: train-q24\nAnswer:");
  EXPECT_EQ(reqs[0].messages[1].role, "assistant");
  EXPECT_EQ(reqs[0].messages[1].content, train[24].answer);
  EXPECT_EQ(reqs[0].messages[6].content, "Question: test-q0\nAnswer:");
}

TEST(Gsm8kPromptTest, BadInputsAreErrors) {
  PromptOptions o;
  o.num_fewshot = 5;
  EXPECT_THROW(BuildGsm8kRequests(Docs("t", 3), Docs("s", 1), o), Error);
  const std::string path = ::testing::TempDir() + "/fission_gsm8k_bad.jsonl";
  {
    std::ofstream f(path);
    f << R"({"question": "q", "answer": "a"})" << "\n" << R"({"question": "q"})" << "\n";
  }
  try {
    LoadGsm8k(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fission_gsm8k_bad.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadGsm8k("/nonexistent.jsonl"), Error);
}

}  // namespace
}  // namespace fission::eval
