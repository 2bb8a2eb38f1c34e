// The real DeepSeek-V3 and Qwen3 tokenizers: known ids, round trips, streaming decode.
#include <gtest/gtest.h>

#include "tokenizer/corpus_testlib.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/test_paths.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {
namespace {

using testing::DeepSeekDir;
using testing::QwenDir;
using Ids = std::vector<std::int32_t>;

class RealTokenizers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    deepseek_ = Tokenizer::Load(DeepSeekDir()).release();
    qwen_ = Tokenizer::Load(QwenDir()).release();
    corpus_ = new std::vector<std::string>(testing::CommittedCorpus());
  }
  static void TearDownTestSuite() {
    delete deepseek_;
    delete qwen_;
    delete corpus_;
  }
  static Tokenizer* deepseek_;
  static Tokenizer* qwen_;
  static std::vector<std::string>* corpus_;
};
Tokenizer* RealTokenizers::deepseek_ = nullptr;
Tokenizer* RealTokenizers::qwen_ = nullptr;
std::vector<std::string>* RealTokenizers::corpus_ = nullptr;

TEST_F(RealTokenizers, KnownIds) {
  // Hand-checked: "Hello" "Ġworld" "!" "Ġ" "123" "45" "Ġ" "你好" in DeepSeek's vocabulary (digits
  // split in threes, CJK split off), and Qwen's single digits.
  EXPECT_EQ(deepseek_->Encode("Hello world! 12345 你好", false), (Ids{19923, 2058, 3, 223, 6895, 1883, 223, 30594}));
  EXPECT_EQ(qwen_->Encode("Hello world! 12345 你好", false),
            (Ids{9707, 1879, 0, 220, 16, 17, 18, 19, 20, 220, 108386}));
  EXPECT_EQ(deepseek_->IdToToken(19923), "Hello");
  EXPECT_EQ(deepseek_->IdToToken(2058), "\xC4\xA0world");  // Ġworld
  EXPECT_EQ(qwen_->TokenToId("<|im_start|>"), 151644);
}

TEST_F(RealTokenizers, SpecialTokensAndConfig) {
  EXPECT_EQ(deepseek_->bos_token_id(), 0);
  EXPECT_EQ(deepseek_->eos_token_id(), 1);
  EXPECT_EQ(qwen_->bos_token_id(), std::nullopt);
  EXPECT_EQ(qwen_->eos_token_id(), 151645);
  EXPECT_EQ(deepseek_->vocab_size(), 128815);  // 128,000 BPE tokens and the added ones
  EXPECT_EQ(qwen_->vocab_size(), 151669);
  // add_bos_token: DeepSeek prepends <｜begin▁of▁sentence｜>, Qwen adds nothing.
  EXPECT_EQ(deepseek_->Encode("hi", true), (Ids{0, 6366}));
  EXPECT_EQ(qwen_->Encode("hi", true), qwen_->Encode("hi", false));
  // Special-token text inside a string becomes the special token.
  Ids ids = qwen_->Encode("a<|im_end|>b", false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 151645);
  EXPECT_TRUE(qwen_->IsSpecial(151645));
  EXPECT_EQ(qwen_->Decode(ids, true), "ab");
  EXPECT_EQ(qwen_->Decode(ids, false), "a<|im_end|>b");
  Ids user = deepseek_->Encode("<｜User｜>x", false);
  EXPECT_EQ(user.front(), 128803);
  EXPECT_FALSE(deepseek_->IsSpecial(128803));
}

TEST_F(RealTokenizers, DecodeOfEncodeIsTheNormalizedText) {
  for (const std::string& s : *corpus_) {
    ASSERT_TRUE(IsValidUtf8(s));
    EXPECT_EQ(deepseek_->Decode(deepseek_->Encode(s, false)), s);
    // Qwen normalizes to NFC first.
    EXPECT_EQ(qwen_->Decode(qwen_->Encode(s, false)), Normalize(s, NormalForm::kNfc));
  }
}

TEST_F(RealTokenizers, Gsm8kRoundTripsAndStreams) {
  if (!testing::HaveGsm8k("test.jsonl")) {
    GTEST_SKIP() << "no gsm8k data at " << testing::Gsm8kDir() << "/test.jsonl";
  }
  for (const std::string& s : testing::Gsm8kStrings("test.jsonl", 700)) {
    EXPECT_EQ(deepseek_->Decode(deepseek_->Encode(s, false)), s);
    EXPECT_EQ(qwen_->Decode(qwen_->Encode(s, false)), Normalize(s, NormalForm::kNfc));
  }
}

void ExpectStreamingMatches(const Tokenizer& tok, const Ids& ids, bool skip) {
  IncrementalDecoder decoder(tok, skip);
  std::string streamed;
  for (std::int32_t id : ids) {
    std::string chunk = decoder.Step(id);
    ASSERT_TRUE(IsValidUtf8(chunk));
    ASSERT_FALSE(chunk.size() >= 3 && chunk.compare(chunk.size() - 3, 3, "\xEF\xBF\xBD") == 0);
    streamed += chunk;
  }
  streamed += decoder.Finish();
  EXPECT_EQ(streamed, tok.Decode(ids, skip));
}

TEST_F(RealTokenizers, StreamingDecodeEqualsFullDecode) {
  for (const std::string& s : *corpus_) {
    for (Tokenizer* tok : {deepseek_, qwen_}) {
      Ids ids = tok->Encode(s, true);
      ExpectStreamingMatches(*tok, ids, false);
      ExpectStreamingMatches(*tok, ids, true);
    }
  }
}

TEST_F(RealTokenizers, StreamingHoldsIncompleteCharacters) {
  // "🦜" is four bytes; Qwen encodes it as two byte-level tokens that split the character.
  Ids ids = qwen_->Encode("🦜", false);
  EXPECT_EQ(ids, (Ids{123918, 250}));
  ASSERT_GT(ids.size(), 1u);
  IncrementalDecoder decoder(*qwen_, false);
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(decoder.Step(ids[i]), "");
  EXPECT_EQ(decoder.Step(ids.back()), "🦜");
  EXPECT_EQ(decoder.Finish(), "");
  // An id sequence that never completes a character is flushed with U+FFFD at the end.
  IncrementalDecoder broken(*qwen_, false);
  EXPECT_EQ(broken.Step(ids[0]), "");
  EXPECT_EQ(broken.Finish(), qwen_->Decode({ids[0]}));
  // Context ids are not emitted.
  Ids prompt = qwen_->Encode("Hello", false);
  IncrementalDecoder with_context(*qwen_, false, prompt);
  EXPECT_EQ(with_context.Step(qwen_->Encode(" world", false)[0]), " world");
}

TEST_F(RealTokenizers, StreamingEmitsInvalidRunsWithoutWaitingForTheEnd) {
  // Byte-level tokens of stray continuation bytes never form a character; the decoder still
  // emits them (as U+FFFD) as the stream goes, and the whole equals the full decode.
  std::string stray = ByteLevelChar(0x80), lead = ByteLevelChar(0xE4);
  std::int32_t stray_id = *qwen_->TokenToId(stray), lead_id = *qwen_->TokenToId(lead);
  Ids ids;
  for (int i = 0; i < 300; ++i) ids.push_back(i % 7 == 3 ? lead_id : stray_id);
  for (std::int32_t id : qwen_->Encode("end 🦜", false)) ids.push_back(id);
  IncrementalDecoder decoder(*qwen_, false);
  std::string streamed;
  std::size_t emitted_by_100 = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string chunk = decoder.Step(ids[i]);
    ASSERT_TRUE(IsValidUtf8(chunk));
    streamed += chunk;
    if (i == 100) emitted_by_100 = streamed.size();
  }
  streamed += decoder.Finish();
  EXPECT_GT(emitted_by_100, 200u);
  EXPECT_EQ(streamed, qwen_->Decode(ids));
  ExpectStreamingMatches(*deepseek_, ids, false);
}

TEST_F(RealTokenizers, InvalidInputNeverCrashes) {
  std::string invalid = "ok \xFF\xFE bad \xE4\xB8 cut";
  Ids ids = deepseek_->Encode(invalid, false);
  EXPECT_EQ(deepseek_->Decode(ids), Utf8Lossy(invalid));
  EXPECT_EQ(deepseek_->Decode({-1, 999999999, 19923}), "Hello");
  std::string long_spaces(100000, ' ');
  EXPECT_EQ(qwen_->Decode(qwen_->Encode(long_spaces + "x" + long_spaces, false)), long_spaces + "x" + long_spaces);
}

}  // namespace
}  // namespace fission::tokenizer
