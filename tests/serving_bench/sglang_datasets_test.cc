// The datasets drawn as sglang.bench_serving draws them. Expected values come from CPython's
// random and numpy's legacy generator with the same seeds (the draws are listed per test).
#include "serving_bench/sglang_datasets.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "fake_tokenizer.h"

namespace fission::serving_bench {
namespace {

using testing::FakeTokenizer;

std::string Fixture(const std::string& name) { return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/bench/" + name; }
std::string Same(const std::string& p) { return p; }

TEST(RandomIdsTest, LengthsAndIdsAreNumpysDraws) {
  // np.random.seed(1): randint(1, 6, 3) = [4, 5, 1]; randint(1, 5, 3) = [4, 2, 4];
  // randint(0, 31, 3) = [5, 15, 0]; prompt i = (offset_i + i + j) % 31.
  RandomIdsOptions o;
  o.num_prompts = 3;
  o.input_len = 5;
  o.output_len = 4;
  o.seed = 1;
  FakeTokenizer tok;
  const std::vector<DatasetRow> rows = SampleRandomIdsRequests(o, tok);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].prompt, "fghi");  // ids 5 6 7 8
  EXPECT_EQ(rows[1].prompt, "qrstu");
  EXPECT_EQ(rows[2].prompt, "c");
  EXPECT_EQ(rows[0].prompt_len, 4);  // counted as drawn, not re-measured
  EXPECT_EQ(rows[1].output_len, 2);
  EXPECT_TRUE(rows[0].prompt_ids.empty());
  o.keep_ids = true;
  EXPECT_EQ(SampleRandomIdsRequests(o, tok)[1].prompt_ids, (std::vector<std::int32_t>{16, 17, 18, 19, 20}));
  o.range_ratio = 1.5;
  EXPECT_THROW(SampleRandomIdsRequests(o, tok), Error);
}

TEST(ShareGptTest, ShuffledAsPythonAndFilteredAsBenchServing) {
  // pairs alpha, beta, gamma, delta, epsilon (entries without two turns dropped); random.seed(1);
  // random.shuffle gives gamma, delta, epsilon, alpha, beta. gamma's empty completion encodes to
  // one token and is pruned.
  FakeTokenizer tok;
  ShareGptOptions o;
  o.path = Fixture("sharegpt_tiny.json");
  o.num_prompts = 3;
  o.seed = 1;
  std::vector<DatasetRow> rows = SampleShareGptRequests(o, tok, Same);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].prompt, "delta");
  EXPECT_EQ(rows[1].prompt, "epsilon");
  EXPECT_EQ(rows[2].prompt, "alpha");
  EXPECT_EQ(rows[0].prompt_len, 6);  // BOS and five letters
  EXPECT_EQ(rows[0].output_len, 5);  // "four" with BOS
  o.fixed_output_len = 10;
  rows = SampleShareGptRequests(o, tok, Same);
  EXPECT_EQ(rows[0].prompt, "gamma");
  EXPECT_EQ(rows[0].output_len, 10);
  o.fixed_output_len.reset();
  o.context_len = 13;  // drops epsilon (8 + 9) and alpha (6 + 8)
  rows = SampleShareGptRequests(o, tok, [](const std::string& p) { return p; });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].prompt, "beta");
  // The wrapper runs before the prompt is measured.
  o.context_len.reset();
  rows = SampleShareGptRequests(o, tok, [](const std::string& p) { return "<" + p + ">"; });
  EXPECT_EQ(rows[0].prompt, "<delta>");
  EXPECT_EQ(rows[0].prompt_len, 8);
}

TEST(ShareGptTest, NeedsALocalFileAndNamesIt) {
  FakeTokenizer tok;
  ShareGptOptions o;
  try {
    SampleShareGptRequests(o, tok, Same);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nothing is downloaded"), std::string::npos) << e.what();
  }
  o.path = Fixture("does_not_exist.json");
  EXPECT_THROW(SampleShareGptRequests(o, tok, Same), Error);
  o.path = Fixture("sharegpt_tiny.json");
  o.fixed_output_len = 3;
  EXPECT_THROW(SampleShareGptRequests(o, tok, Same), Error);  // bench_serving's "output_len too small"
}

TEST(SharedPrefixTest, GroupsShareTheirSystemPrompt) {
  FakeTokenizer tok;
  SharedPrefixOptions o;
  o.num_groups = 3;
  o.prompts_per_group = 4;
  o.system_prompt_len = 20;
  o.question_len = 5;
  o.output_len = 7;
  o.ordered = true;
  const std::vector<DatasetRow> rows = SampleSharedPrefixRequests(o, tok);
  ASSERT_EQ(rows.size(), 12u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string system = rows[i].prompt.substr(0, rows[i].prompt.find("\n\n"));
    const std::string first = rows[i / 4 * 4].prompt;
    EXPECT_EQ(first.substr(0, first.find("\n\n")), system) << i;
    EXPECT_EQ(rows[i].output_len, 7);  // range ratio 1: fixed lengths
    EXPECT_EQ(rows[i].prompt_len, static_cast<std::int64_t>(tok.Encode(rows[i].prompt, true).size()));
  }
  EXPECT_NE(rows[0].prompt.substr(0, rows[0].prompt.find("\n\n")), rows[4].prompt.substr(0, rows[4].prompt.find("\n\n")));
  // Shuffled: the same prompts in another order.
  o.ordered = false;
  std::vector<DatasetRow> shuffled = SampleSharedPrefixRequests(o, tok);
  ASSERT_EQ(shuffled.size(), 12u);
  std::vector<std::string> a, b;
  for (const auto& r : rows) a.push_back(r.prompt);
  for (const auto& r : shuffled) b.push_back(r.prompt);
  EXPECT_NE(a, b);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace fission::serving_bench
