// Incremental text: the window stream's pieces concatenate to the text of all ids decoded
// together, for a tokenizer whose decode strips a leading space and spreads characters over
// several tokens; and the engine's streamed text and stop strings work with it.
#include "engine/detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::Collector;
using testing::FakeCausalLM;
using testing::Greedy;
using testing::MakePrompt;

// Token pieces: a space and a letter, a letter, the lead byte 0xC3 of a two-byte character, or
// a continuation byte 0xA9. Decoding replaces every byte that is not part of a complete UTF-8
// character with U+FFFD, then strips one leading space, as SentencePiece-style decoders do.
class TrickyDetokenizer : public Detokenizer {
 public:
  static std::string Piece(std::int32_t id) {
    const char letter = static_cast<char>('a' + (id / 4) % 26);
    switch (id % 4) {
      case 0:
        return std::string(" ") + letter;
      case 1:
        return std::string(1, letter);
      case 2:
        return "\xC3";
      default:
        return "\xA9";
    }
  }
  std::string Decode(const std::vector<std::int32_t>& ids) const override {
    ++calls;
    std::string bytes, text;
    for (std::int32_t id : ids) bytes += Piece(id);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(bytes[i]);
      if (c < 0x80) {
        text += bytes[i];
      } else if (c == 0xC3 && i + 1 < bytes.size() && static_cast<unsigned char>(bytes[i + 1]) == 0xA9) {
        text += "\xC3\xA9";
        ++i;
      } else {
        text += "\xEF\xBF\xBD";
      }
    }
    if (!text.empty() && text[0] == ' ') text.erase(0, 1);
    return text;
  }
  mutable std::int64_t calls = 0;
};

TEST(DetokenizerTest, WindowStreamPiecesConcatenateToTheWholeDecode) {
  TrickyDetokenizer detok;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int length = std::uniform_int_distribution<int>(1, 40)(rng);
    std::vector<std::int32_t> ids;
    std::string streamed;
    auto stream = detok.NewStream();
    for (int i = 0; i < length; ++i) {
      ids.push_back(std::uniform_int_distribution<int>(0, 63)(rng));
      const std::string piece = stream->Append(ids.back());
      streamed += piece;
      // What is settled is a prefix of the whole decode so far.
      const std::string whole = detok.Decode(ids);
      ASSERT_EQ(whole.compare(0, streamed.size(), streamed), 0) << "trial " << trial << " token " << i;
    }
    streamed += stream->Flush();
    EXPECT_EQ(streamed, detok.Decode(ids)) << "trial " << trial;
  }
}

TEST(DetokenizerTest, AnIncompleteCharacterIsHeldBackUntilItCompletes) {
  TrickyDetokenizer detok;
  auto stream = detok.NewStream();
  EXPECT_EQ(stream->Append(0), "a");  // " a" with the leading space stripped
  EXPECT_EQ(stream->Append(2), "");   // lead byte alone: held back
  EXPECT_EQ(stream->Append(3), "\xC3\xA9");
  EXPECT_EQ(stream->Append(4), " b");  // the space of a later word stays
  EXPECT_EQ(stream->Append(2), "");
  EXPECT_EQ(stream->Flush(), "\xEF\xBF\xBD");  // still incomplete at the end
}

TEST(DetokenizerTest, EachTokenDecodesOnlyAShortWindow) {
  TrickyDetokenizer detok;
  auto stream = detok.NewStream();
  std::int64_t calls_before = detok.calls;
  for (int i = 0; i < 1000; ++i) stream->Append(i % 2 == 0 ? 4 : 1);  // " b", "b", ...
  // Two decodes of at most a few ids per token, not one decode of everything.
  EXPECT_LE(detok.calls - calls_before, 2000);
}

TEST(DetokenizerTest, EngineTextAndStopStringsWithATrickyTokenizer) {
  FakeCausalLM model(64);
  TrickyDetokenizer detok;
  for (int seed = 0; seed < 8; ++seed) {
    const auto prompt = MakePrompt(seed, 9, 64);
    const auto greedy = model.ReferenceGreedy(prompt, 30);
    const std::string text = detok.Decode(greedy);
    {
      Engine engine(&model, EngineConfig{}, &detok);
      Collector collector;
      const auto id = collector.Submit(engine, prompt, Greedy(30));
      engine.RunUntilIdle();
      EXPECT_EQ(collector.results(id)[0].text, text) << seed;
    }
    // A stop string from the middle of the text: the output is the text before its first match.
    const std::string stop = text.substr(text.size() / 2, 3);
    if (stop.find("\xEF\xBF\xBD") != std::string::npos || stop.size() < 3) continue;
    Engine engine(&model, EngineConfig{}, &detok);
    Collector collector;
    SamplingParams p = Greedy(30);
    p.stop = {stop};
    const auto id = collector.Submit(engine, prompt, p);
    engine.RunUntilIdle();
    const auto& r = collector.results(id)[0];
    EXPECT_EQ(r.text, text.substr(0, text.find(stop))) << seed;
    EXPECT_EQ(r.finish_reason, FinishReason::kStop) << seed;
  }
}

}  // namespace
}  // namespace fission::engine
