// Tokenizer::TokenBytes, the bytes constrained decoding matches grammars against: concatenated
// over an encoded text they give the text back (so a token holding part of a character gives
// exactly that part), and special tokens give nothing.
#include <gtest/gtest.h>

#include "tokenizer/corpus_testlib.h"
#include "tokenizer/test_paths.h"
#include "tokenizer/tokenizer.h"

namespace fission::tokenizer {
namespace {

void ExpectBytesSpellTheText(const Tokenizer& tok, const std::string& text) {
  const std::vector<std::int32_t> ids = tok.Encode(text, false);
  std::string bytes;
  for (std::int32_t id : ids) bytes += tok.TokenBytes(id);
  EXPECT_EQ(bytes, tok.Decode(ids, true)) << text;
}

TEST(TokenBytes, RealTokenizersSpellTheirTexts) {
  for (const std::string& dir : {testing::DeepSeekDir(), testing::QwenDir()}) {
    std::unique_ptr<Tokenizer> tok;
    try {
      tok = Tokenizer::Load(dir);
    } catch (const Error&) {
      GTEST_SKIP() << "no tokenizer at " << dir << " (scripts/setup.sh installs it)";
    }
    for (const std::string& s : testing::CommittedCorpus()) ExpectBytesSpellTheText(*tok, s);
    // A four-byte character split over two tokens: each token holds its raw bytes.
    const std::vector<std::int32_t> parrot = tok->Encode("\xF0\x9F\xA6\x9C", false);
    std::string joined;
    for (std::int32_t id : parrot) joined += tok->TokenBytes(id);
    EXPECT_EQ(joined, "\xF0\x9F\xA6\x9C");
    ASSERT_TRUE(tok->eos_token_id().has_value());
    EXPECT_EQ(tok->TokenBytes(*tok->eos_token_id()), "") << "special tokens are not text";
  }
}

TEST(TokenBytes, DemoModelTokens) {
  const auto tok = Tokenizer::Load(testing::SourceDir() + "/models/demo-deepseek-v3");
  EXPECT_EQ(tok->TokenBytes(*tok->TokenToId("\xC4\xA0has")), " has") << "byte-level space";
  EXPECT_EQ(tok->TokenBytes(*tok->TokenToId("\xC3\x83")), "\xC3") << "one byte of a character";
  EXPECT_EQ(tok->TokenBytes(0), "");
  EXPECT_EQ(tok->TokenBytes(1 << 30), "") << "an unknown id";
  ExpectBytesSpellTheText(*tok, "Question: Mia has 12 stickers. {\"a\": [1, 2]}\n");
}

}  // namespace
}  // namespace fission::tokenizer
