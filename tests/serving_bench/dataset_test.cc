#include "serving_bench/dataset.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "base/error.h"
#include "fake_tokenizer.h"

namespace fission::serving_bench {
namespace {

using testing::FakeTokenizer;

size_t Measure(const FakeTokenizer& tok, const std::string& text) { return tok.Encode(text, false).size(); }

TEST(RandomDatasetTest, ExactLengthsWithinTheRangeRatio) {
  FakeTokenizer tok;
  RandomDatasetOptions o;
  o.num_prompts = 200;
  o.input_len = 40;
  o.output_len = 30;
  o.range_ratio = 0.5;
  o.seed = 3;
  const auto rows = SampleRandomRequests(o, tok);
  ASSERT_EQ(rows.size(), 200u);
  std::set<std::int64_t> input_lens, output_lens;
  for (const DatasetRow& r : rows) {
    EXPECT_GE(r.prompt_len, 20);
    EXPECT_LE(r.prompt_len, 40);
    EXPECT_GE(r.output_len, 15);
    EXPECT_LE(r.output_len, 30);
    // The prompt re-encodes to exactly the recorded length and holds no BOS/EOS.
    EXPECT_EQ(Measure(tok, r.prompt), static_cast<size_t>(r.prompt_len)) << r.prompt;
    EXPECT_EQ(r.prompt.find('<'), std::string::npos) << r.prompt;
    input_lens.insert(r.prompt_len);
    output_lens.insert(r.output_len);
  }
  // Uniform over the whole range: with 200 draws every bound is hit.
  EXPECT_EQ(*input_lens.begin(), 20);
  EXPECT_EQ(*input_lens.rbegin(), 40);
  EXPECT_EQ(*output_lens.begin(), 15);
  EXPECT_EQ(*output_lens.rbegin(), 30);
  EXPECT_GE(input_lens.size(), 18u);
}

TEST(RandomDatasetTest, RatioOneGivesFixedLengthsAndMergingTokensAreRefitted) {
  FakeTokenizer tok;
  RandomDatasetOptions o;
  o.num_prompts = 50;
  o.input_len = 64;
  o.output_len = 8;
  o.range_ratio = 1.0;
  bool saw_merge = false;
  for (const DatasetRow& r : SampleRandomRequests(o, tok)) {
    EXPECT_EQ(r.prompt_len, 64);
    EXPECT_EQ(r.output_len, 8);
    EXPECT_EQ(Measure(tok, r.prompt), 64u);
    // Consecutive ids 0, 1 ("a", "b") decode to "ab", which re-encodes as one token: the
    // generator had to pad those prompts.
    if (r.prompt.find("ab") != std::string::npos) saw_merge = true;
  }
  EXPECT_TRUE(saw_merge);
}

TEST(RandomDatasetTest, SeedReproducibility) {
  FakeTokenizer tok;
  RandomDatasetOptions o;
  o.num_prompts = 20;
  o.input_len = 30;
  o.output_len = 10;
  o.range_ratio = 0.2;
  o.seed = 11;
  const auto a = SampleRandomRequests(o, tok);
  const auto b = SampleRandomRequests(o, tok);
  o.seed = 12;
  const auto c = SampleRandomRequests(o, tok);
  ASSERT_EQ(a.size(), b.size());
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].output_len, b[i].output_len);
    differs |= a[i].prompt != c[i].prompt;
  }
  EXPECT_TRUE(differs);
}

TEST(RandomDatasetTest, SharedPrefix) {
  FakeTokenizer tok;
  RandomDatasetOptions o;
  o.num_prompts = 30;
  o.input_len = 20;
  o.output_len = 4;
  o.range_ratio = 0.5;
  o.prefix_len = 16;
  const auto rows = SampleRandomRequests(o, tok);
  // The common text prefix of all prompts spans the 16 prefix tokens.
  std::string common = rows[0].prompt;
  for (const DatasetRow& r : rows) {
    size_t n = 0;
    while (n < common.size() && n < r.prompt.size() && common[n] == r.prompt[n]) ++n;
    common.resize(n);
    EXPECT_GE(r.prompt_len, 16 + 10);
    EXPECT_LE(r.prompt_len, 16 + 20);
    EXPECT_EQ(Measure(tok, r.prompt), static_cast<size_t>(r.prompt_len));
  }
  EXPECT_GE(Measure(tok, common), 15u);  // the last prefix token may merge with the first suffix one
}

TEST(RandomDatasetTest, BadOptionsAreErrors) {
  FakeTokenizer tok;
  RandomDatasetOptions o;
  o.range_ratio = 1.5;
  EXPECT_THROW(SampleRandomRequests(o, tok), Error);
  o.range_ratio = 0;
  o.input_len = 0;
  EXPECT_THROW(SampleRandomRequests(o, tok), Error);
  o.input_len = 4;
  o.num_prompts = 0;
  EXPECT_THROW(SampleRandomRequests(o, tok), Error);
}

TEST(JsonlDatasetTest, LoadsPromptsAndNamesBadLines) {
  FakeTokenizer tok;
  const std::string path = ::testing::TempDir() + "/fission_prompts.jsonl";
  {
    std::ofstream f(path);
    f << R"({"prompt": "abc abc", "output_len": 7})" << "\n\n" << R"({"prompt": "xyz", "prompt_len": 99})" << "\n";
  }
  const auto rows = LoadJsonlRequests(path, 0, 5, &tok);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].prompt_len, 3);
  EXPECT_EQ(rows[0].output_len, 7);
  EXPECT_EQ(rows[1].prompt_len, 99);
  EXPECT_EQ(rows[1].output_len, 5);
  EXPECT_EQ(LoadJsonlRequests(path, 1, 5, &tok).size(), 1u);
  {
    std::ofstream f(path);
    f << R"({"prompt": "a"})" << "\n" << "{broken\n";
  }
  try {
    LoadJsonlRequests(path, 0, 5, &tok);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fission_prompts.jsonl:2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(LoadJsonlRequests("/nonexistent/x.jsonl", 0, 5, &tok), Error);
}

TEST(JsonlDatasetTest, TokenIdLinesAreSentAsIds) {
  const std::string path = ::testing::TempDir() + "/fission_prompt_ids_" + std::to_string(getpid()) + ".jsonl";
  {
    std::ofstream f(path);
    f << R"({"prompt_ids": [4, 5, 6], "output_len": 2})" << "\n"
      << R"({"prompt": "kept", "prompt_ids": [7], "prompt_len": 99})" << "\n";
  }
  const auto rows = LoadJsonlRequests(path, 0, 5, nullptr);  // ids need no tokenizer
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].prompt_ids, (std::vector<std::int32_t>{4, 5, 6}));
  EXPECT_EQ(rows[0].prompt_len, 3);
  EXPECT_EQ(rows[0].output_len, 2);
  EXPECT_EQ(rows[1].prompt, "kept");
  EXPECT_EQ(rows[1].prompt_len, 1);  // what the server receives
  {
    std::ofstream f(path);
    f << R"({"prompt_ids": [1, "x"]})" << "\n";
  }
  try {
    LoadJsonlRequests(path, 0, 5, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":1: prompt_ids"), std::string::npos) << e.what();
  }
}

TEST(DescribeLengthsTest, PrintsTotals) {
  EXPECT_EQ(DescribeLengths({{"a", 10, 3, {}, {}}, {"b", 20, 5, {}, {}}}),
            "#Input tokens: 30\n#Output tokens: 8\n"
            "Input lengths: min 10, mean 15.0, max 20\nOutput lengths: min 3, mean 4.0, max 5\n");
}

}  // namespace
}  // namespace fission::serving_bench
