// Each tokenizer.json component on small hand-made tokenizers, with expectations worked out from
// the reference semantics.
#include <gtest/gtest.h>

#include <filesystem>

#include "tokenizer/decoders.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/unicode.h"

namespace fission::tokenizer {
namespace {

using Ids = std::vector<std::int32_t>;

std::unique_ptr<HfTokenizer> Make(const std::string& tokenizer_json, TokenizerConfig config = {}) {
  return std::make_unique<HfTokenizer>(Json::parse(tokenizer_json), std::move(config), "test.json");
}

// vocab a0 b1 c2 -3 a-4 b-5 -b6 -c7 --8: merged pieces reveal where the pre-tokenizer cut.
std::string SplitTokenizer(const std::string& behavior, bool invert) {
  return R"({"added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Split",
      "pattern": {"String": "-"}, "behavior": ")" + behavior + R"(", "invert": )" + (invert ? "true" : "false") +
         R"(}, "post_processor": null, "decoder": null,
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "-": 3, "a-": 4, "b-": 5, "-b": 6, "-c": 7,
      "--": 8}, "merges": ["a -", "b -", "- b", "- c", "- -"]}})";
}

TEST(SplitPreTokenizer, EachBehavior) {
  EXPECT_EQ(Make(SplitTokenizer("Isolated", false))->Encode("a-b--c", false), (Ids{0, 3, 1, 3, 3, 2}));
  EXPECT_EQ(Make(SplitTokenizer("Removed", false))->Encode("a-b--c", false), (Ids{0, 1, 2}));
  EXPECT_EQ(Make(SplitTokenizer("MergedWithPrevious", false))->Encode("a-b--c", false), (Ids{4, 5, 3, 2}));
  EXPECT_EQ(Make(SplitTokenizer("MergedWithNext", false))->Encode("a-b--c", false), (Ids{0, 6, 3, 7}));
  EXPECT_EQ(Make(SplitTokenizer("Contiguous", false))->Encode("a-b--c", false), (Ids{0, 3, 1, 8, 2}));
  EXPECT_EQ(Make(SplitTokenizer("Removed", true))->Encode("a-b--c", false), (Ids{3, 3, 3}));
  EXPECT_EQ(Make(SplitTokenizer("MergedWithPrevious", true))->Encode("a-b--c", false), (Ids{0, 6, 3, 7}));
  EXPECT_THROW(Make(SplitTokenizer("Sideways", false)), Error);
}

TEST(DigitsPreTokenizer, IndividualAndGrouped) {
  std::string base = R"({"model": {"type": "BPE", "vocab": {"a": 0, "1": 1, "2": 2, "3": 3, "12": 4, "123": 5},
      "merges": ["1 2", "12 3"]}, "pre_tokenizer": {"type": "Digits", "individual_digits": )";
  EXPECT_EQ(Make(base + "false}}")->Encode("a123", false), (Ids{0, 5}));
  EXPECT_EQ(Make(base + "true}}")->Encode("a123", false), (Ids{0, 1, 2, 3}));
}

TEST(ByteLevelPreTokenizer, PrefixSpaceAndRegex) {
  // Ġ (U+0120) stands for the space byte.
  std::string j = R"({"model": {"type": "BPE", "vocab": {"Ġ": 0, "h": 1, "i": 2, "Ġh": 3, "Ġhi": 4, "!": 5},
      "merges": ["Ġ h", "Ġh i"]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true,
      "use_regex": true}, "decoder": {"type": "ByteLevel"}})";
  auto t = Make(j);
  EXPECT_EQ(t->Encode("hi hi!", false), (Ids{4, 4, 5}));
  EXPECT_EQ(t->Decode({4, 4, 5}), " hi hi!");
}

TEST(MetaspacePreTokenizer, PrependSchemesAndDecoder) {
  auto make = [](const std::string& scheme) {
    return Make(R"({"added_tokens": [{"id": 9, "content": "<x>", "special": true}],
        "model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "b": 2, "▁a": 3, "▁b": 4, "<x>": 9},
        "merges": ["▁ a", "▁ b"]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": ")" + scheme + R"(", "split": true},
        "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": ")" + scheme + R"("}})");
  };
  auto always = make("always"), first = make("first"), never = make("never");
  EXPECT_EQ(always->Encode("a b", false), (Ids{3, 4}));
  EXPECT_EQ(always->Decode({3, 4}), "a b");
  EXPECT_EQ(never->Encode("a b", false), (Ids{1, 4}));
  EXPECT_EQ(never->Decode({3, 4}), " a b");
  EXPECT_EQ(always->Encode("<x>a b", false), (Ids{9, 3, 4}));
  EXPECT_EQ(first->Encode("<x>a b", false), (Ids{9, 1, 4}));
  EXPECT_EQ(first->Encode("a b", false), (Ids{3, 4}));
}

TEST(BpeModel, MergeOrderByRank) {
  // "abc": rank 0 merges "b c" first, so "a" + "bc" rather than "ab" + "c".
  auto t = Make(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5},
      "merges": ["b c", "a b", "a bc"]}})");
  EXPECT_EQ(t->Encode("abc", false), (Ids{5}));
  EXPECT_EQ(t->Encode("abab", false), (Ids{3, 3}));
  auto repeated = Make(R"({"model": {"type": "BPE", "vocab": {"a": 0, "aa": 1}, "merges": ["a a"]}})");
  EXPECT_EQ(repeated->Encode("aaa", false), (Ids{1, 0}));  // leftmost pair first
}

TEST(BpeModel, ByteFallbackUnknownAndFuse) {
  std::string vocab = R"("a": 0, "<unk>": 1, "<0xC3>": 2, "<0xA9>": 3)";
  auto fallback = Make(R"({"model": {"type": "BPE", "vocab": {)" + vocab +
                       R"(}, "merges": [], "byte_fallback": true, "unk_token": "<unk>"}})");
  EXPECT_EQ(fallback->Encode("aéa", false), (Ids{0, 2, 3, 0}));
  EXPECT_EQ(fallback->Encode("x", false), (Ids{1}));  // no <0x78> token: unknown
  auto unfused = Make(R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [], "unk_token": "<unk>"}})");
  EXPECT_EQ(unfused->Encode("axyza", false), (Ids{0, 1, 1, 1, 0}));
  auto fused = Make(R"({"model": {"type": "BPE", "vocab": {)" + vocab +
                    R"(}, "merges": [], "unk_token": "<unk>", "fuse_unk": true}})");
  EXPECT_EQ(fused->Encode("axyza", false), (Ids{0, 1, 0}));
  auto no_unk = Make(R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})");
  EXPECT_EQ(no_unk->Encode("axa", false), (Ids{0, 0}));  // unknown characters vanish
  auto decoder = Make(R"({"model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": [], "byte_fallback": true},
      "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}})");
  EXPECT_EQ(decoder->Decode({0, 2, 3, 0}), "aéa");
  EXPECT_EQ(decoder->Decode({0, 2, 0}), "a\xEF\xBF\xBD" "a");  // a lone lead byte becomes U+FFFD
}

TEST(BpeModel, PrefixSuffixAndIgnoreMerges) {
  auto t = Make(R"({"model": {"type": "BPE", "vocab": {"a": 0, "##b": 1, "##c</w>": 2, "ab": 3, "abc</w>": 4},
      "merges": ["a ##b"], "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>"}})");
  EXPECT_EQ(t->Encode("abc", false), (Ids{3, 2}));
  std::string vocab = R"({"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4})";
  auto merges = Make(R"({"model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": ["a b"]}})");
  auto ignore = Make(R"({"model": {"type": "BPE", "vocab": )" + vocab + R"(, "merges": ["a b"], "ignore_merges": true}})");
  EXPECT_EQ(merges->Encode("abc", false), (Ids{3, 2}));
  EXPECT_EQ(ignore->Encode("abc", false), (Ids{4}));
}

TEST(AddedTokens, StripSingleWordAndNormalized) {
  auto t = Make(R"({"added_tokens": [
      {"id": 10, "content": "<m>", "lstrip": true, "rstrip": false, "normalized": false, "special": true},
      {"id": 11, "content": "<r>", "lstrip": false, "rstrip": true, "normalized": false, "special": false},
      {"id": 12, "content": "ab", "single_word": true, "normalized": false, "special": false},
      {"id": 13, "content": "HEY", "normalized": true, "special": false},
      {"id": 14, "content": "<m>x", "normalized": false, "special": false}],
      "normalizer": {"type": "Lowercase"},
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, " ": 2, "c": 3, "h": 4, "e": 5, "y": 6, "x": 7},
      "merges": []}})");
  EXPECT_EQ(t->Encode("a  <m>b", false), (Ids{0, 10, 1}));      // lstrip eats the spaces before
  EXPECT_EQ(t->Encode("a<r>  b", false), (Ids{0, 11, 1}));      // rstrip eats the spaces after
  EXPECT_EQ(t->Encode("ab c", false), (Ids{12, 2, 3}));         // a whole word
  EXPECT_EQ(t->Encode("cab", false), (Ids{3, 0, 1}));           // inside a word: not the token
  EXPECT_EQ(t->Encode("HeY", false), (Ids{13}));                // matched after lowercasing
  EXPECT_EQ(t->Encode("<m>x", false), (Ids{14}));               // longest match wins
  EXPECT_EQ(t->Decode({0, 10, 1}, true), "a b");  // no decoder: tokens joined by spaces
  EXPECT_EQ(t->Decode({0, 11, 1}, true), "a <r> b");
}

TEST(PostProcessors, TemplateSequenceAndConfigFlags) {
  std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0, "<s>": 1, "</s>": 2}, "merges": []},
      "added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}])";
  auto tmpl = Make("{" + model + R"(, "post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel"},
      {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
      {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
      "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}]}})");
  EXPECT_EQ(tmpl->Encode("aa", true), (Ids{1, 0, 0, 2}));
  EXPECT_EQ(tmpl->Encode("aa", false), (Ids{0, 0}));
  TokenizerConfig config;
  config.bos_token = "<s>";
  config.eos_token = "</s>";
  config.add_bos_token = false;
  config.add_eos_token = true;
  EXPECT_EQ(Make("{" + model + "}", config)->Encode("a", true), (Ids{0, 2}));
  auto bert = Make("{" + model + R"(, "post_processor": {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}})");
  EXPECT_EQ(bert->Encode("a", true), (Ids{1, 0, 2}));
}

std::string Normalized(const std::string& normalizer_json, std::string text) {
  MakeNormalizer(Json::parse(normalizer_json), "n")->Normalize(&text);
  return text;
}

TEST(Normalizers, EachKind) {
  EXPECT_EQ(Normalized(R"({"type": "NFC"})", "Cafe\u0301"), "Café");
  EXPECT_EQ(Normalized(R"({"type": "NFD"})", "é"), "e\u0301");
  EXPECT_EQ(Normalized(R"({"type": "NFKC"})", "ﬁ ① Ａ ｶ"), "fi 1 A カ");
  EXPECT_EQ(Normalized(R"({"type": "NFKD"})", "ﬁé"), "fie\u0301");
  EXPECT_EQ(Normalized(R"({"type": "NFC"})", "\u1100\u1161\u11A8"), "각");  // Hangul composition
  EXPECT_EQ(Normalized(R"({"type": "NFD"})", "각"), "\u1100\u1161\u11A8");
  EXPECT_EQ(Normalized(R"({"type": "NFC"})", "a\u0323\u0302"), "ậ");  // reordered marks compose
  EXPECT_EQ(Normalized(R"({"type": "Lowercase"})", "ÀBC ΣΑ"), "àbc σα");
  EXPECT_EQ(Normalized(R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})", "a b  c"), "a▁b▁▁c");
  EXPECT_EQ(Normalized(R"({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})", "a b   c"), "a b c");
  EXPECT_EQ(Normalized(R"({"type": "Prepend", "prepend": "▁"})", "ab"), "▁ab");
  EXPECT_EQ(Normalized(R"({"type": "Prepend", "prepend": "▁"})", ""), "");
  EXPECT_EQ(Normalized(R"({"type": "Strip", "strip_left": true, "strip_right": false})", " \t a \n"), "a \n");
  EXPECT_EQ(Normalized(R"({"type": "Sequence", "normalizers": [{"type": "Strip"}, {"type": "Lowercase"}]})", " AB "),
            "ab");
}

std::string Decoded(const std::string& decoder_json, std::vector<std::string> tokens) {
  MakeDecoder(Json::parse(decoder_json), "d")->DecodeChain(&tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(Decoders, EachKind) {
  EXPECT_EQ(Decoded(R"({"type": "ByteLevel"})", {"Hello", "Ġworld", "Ċ", "<｜User｜>"}), "Hello world\n<｜User｜>");
  EXPECT_EQ(Decoded(R"({"type": "ByteLevel"})", {"ä¸"}), "\xEF\xBF\xBD");  // an incomplete character
  EXPECT_EQ(Decoded(R"({"type": "Replace", "pattern": {"String": "▁"}, "content": " "})", {"▁a", "▁b"}), " a b");
  EXPECT_EQ(Decoded(R"({"type": "ByteFallback"})", {"a", "<0xE2>", "<0x82>", "<0xAC>", "b"}), "a€b");
  // A run of byte tokens that is not valid UTF-8 as a whole gives one U+FFFD per byte.
  EXPECT_EQ(Decoded(R"({"type": "ByteFallback"})", {"<0xE2>", "<0x82>", "<0xFF>"}), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(Decoded(R"({"type": "Strip", "content": " ", "start": 1, "stop": 1})", {"  a  ", "b"}), " a b");
  EXPECT_EQ(Decoded(R"({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always"})", {"▁a", "▁b"}), "a b");
  EXPECT_EQ(Decoded(R"({"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"},
      "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1,
      "stop": 0}]})", {"▁Hi", "<0x21>"}), "Hi!");
}

std::string LoadError(const std::string& tokenizer_json) {
  try {
    Make(tokenizer_json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(MalformedTokenizerJson, FailsNamingTheComponent) {
  std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  EXPECT_EQ(LoadError("{" + model + R"(, "normalizer": {"type": "BertNormalizer"}})"),
            "test.json: normalizer: unsupported normalizer type \"BertNormalizer\"");
  EXPECT_EQ(LoadError("{" + model + R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits"},
      {"type": "Whitespace"}]}})"),
            "test.json: pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type \"Whitespace\"");
  EXPECT_EQ(LoadError("{" + model + R"(, "decoder": {"type": "WordPiece"}})"),
            "test.json: decoder: unsupported decoder type \"WordPiece\"");
  EXPECT_EQ(LoadError("{" + model + R"(, "post_processor": {"type": "Bogus"}})"),
            "test.json: post_processor: unsupported post-processor type \"Bogus\"");
  EXPECT_EQ(LoadError(R"({"model": {"type": "Unigram", "vocab": []}})"),
            "test.json: model: unsupported model type \"Unigram\" (only BPE)");
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})"),
            "test.json: model (BPE).merges[0]: \"b\" is not in the vocabulary");
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a"]}})"),
            "test.json: model (BPE).merges[0]: expected \"left right\", got \"a\"");
  EXPECT_EQ(LoadError(R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})"),
            "test.json: model (BPE).vocab[\"a\"]: id must be a non-negative integer");
  EXPECT_EQ(LoadError("{}"), "test.json: model: missing");
  EXPECT_EQ(LoadError("{" + model + R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"},
      "behavior": "Isolated"}})").substr(0, 70),
            "test.json: pre_tokenizer (Split): regex does not compile at offset 9: ");
  EXPECT_EQ(LoadError("{" + model + R"(, "added_tokens": [{"id": 1}]})"),
            "test.json: added_tokens[0]: missing field 'content'");
  EXPECT_EQ(LoadError("{" + model + R"(, "added_tokens": [{"id": 7.7e83, "content": "x"}]})"),
            "test.json: added_tokens[0]: field \"id\" must be an integer, got 7.7e+83");
  EXPECT_THROW(Tokenizer::Load("/nonexistent-dir"), Error);
  // A number too large for a double is an Error naming the file, not an escaping exception.
  std::string dir = std::string(FISSION_BINARY_DIR) + "/overflow_tokenizer";
  std::filesystem::create_directories(dir);
  std::FILE* f = std::fopen((dir + "/tokenizer.json").c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fputs(R"({"model": {"type": "BPE", "dropout": 1e99999, "vocab": {}, "merges": []}})", f);
  std::fclose(f);
  try {
    Tokenizer::Load(dir);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflow_tokenizer/tokenizer.json: invalid JSON"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fission::tokenizer
