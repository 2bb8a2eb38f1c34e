// Token masks against brute force: along random walks through several grammars, the mask
// equals the set of tokens whose bytes, appended to the output so far, keep it a valid prefix.
// The vocabularies mix single bytes, tokens that span several grammar symbols, whitespace runs and
// multi-byte UTF-8 characters (whole, split across tokens, and glued to punctuation).
#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "grammar/ebnf_parser.h"
#include "grammar/grammar_cache.h"
#include "grammar/grammar_testlib.h"
#include "grammar/json_schema.h"
#include "grammar/json_text.h"
#include "grammar/regex_parser.h"

namespace fission::grammar {
namespace {

using testing::BruteForceAllowed;
using testing::ComputedAllowed;
using testing::Matches;

std::vector<std::string> MixedTokens() {
  return {"{",     "{\"",     "\":",     "\": ",    "\", \"", "\"}",   "},",      "}}",     "]}",     "[",
          "[{",    "\",",     ", ",      " \"",     "true",   "tr",    "ue",      "ue}",    "false",  "null",
          "nu",    "\n",      "\n  ",    "  ",      "   ",    "name",  "\"name",  "age",    "\"age\": ", "tags",
          "12",    "3.",      ".5",      "e+",      "-1",     "0,",    "00",      "\xC3\xA9", "\xC3",  "\xA9\"",
          "\xF0\x9F", "\x98\x80", "\xF0\x9F\x98\x80", "caf\xC3\xA9", "\\n", "\\u00", "e9", "ab", "abc", "x",
          "(",     "((",      "1+",      "+(",      ")*",     "))",    "*2",      "<tool_call>", "<tool", "_call>\n",
          "\"red\"", "\"re",  "d\"",     "blue",    "\"green\"", "}\n", "\"kind\": \"", "\": [", "], ", "\"}, "};
}

void CheckWalks(const Grammar& grammar, int walks, int steps, std::uint32_t seed) {
  const auto vocab = testing::ByteVocabulary(MixedTokens());
  const auto g = testing::Compile(grammar, vocab);
  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    std::string text;
    for (int s = 0; s < steps; ++s) {
      const std::vector<std::int32_t> computed = ComputedAllowed(m);
      ASSERT_EQ(computed, BruteForceAllowed(g, text)) << "after '" << text << "' (walk " << w << ")";
      EXPECT_EQ(m.IsComplete(), Matches(g, text)) << text;
      if (computed.empty()) {
        EXPECT_TRUE(m.IsComplete()) << "no continuation although incomplete: " << text;
        EXPECT_TRUE(m.IsTerminated());
        break;
      }
      // Prefer the longer tokens, so walks get somewhere.
      std::vector<std::int32_t> multi;
      for (std::int32_t id : computed)
        if (vocab->bytes(id).size() > 1) multi.push_back(id);
      const auto& pool = (!multi.empty() && rng() % 3 != 0) ? multi : computed;
      const std::int32_t pick = pool[rng() % pool.size()];
      ASSERT_TRUE(m.AcceptToken(pick));
      text += vocab->bytes(pick);
    }
  }
}

TEST(TokenMask, NestedSchemaMatchesBruteForce) {
  const OrderedJson schema = OrderedJson::parse(R"({"type": "object", "properties": {
      "name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer", "minimum": 0, "maximum": 120},
      "color": {"enum": ["red", "green", "blue"]},
      "tags": {"type": "array", "items": {"type": "object", "properties": {"kind": {"type": "string"}},
               "required": ["kind"]}, "maxItems": 2}},
      "required": ["name", "color"]})");
  CheckWalks(JsonSchemaGrammar(schema), 12, 40, 1);
}

TEST(TokenMask, LongCountedRepetitionsCallTheirItemAndMatchBruteForce) {
  // Three hundred items of a few dozen automaton states each: the item is called, not copied.
  const OrderedJson schema = OrderedJson::parse(R"({"type": "array", "maxItems": 300, "items": {"type": "object",
      "properties": {"kind": {"enum": ["red", "green", "blue"]}, "tags": {"type": "array", "items": {"type": "string",
      "maxLength": 3}, "maxItems": 2}}, "required": ["kind"]}})");
  const Grammar g = JsonSchemaGrammar(schema);
  EXPECT_LT(Automaton::Compile(g).num_states(), 3000);
  CheckWalks(g, 8, 40, 7);
}

TEST(TokenMask, RecursiveJsonMatchesBruteForce) { CheckWalks(JsonObjectGrammar(), 12, 40, 2); }

TEST(TokenMask, RecursiveEbnfMatchesBruteForce) {
  CheckWalks(ParseEbnf("root ::= e\ne ::= e \"+\" t | t\nt ::= t \"*\" f | f\nf ::= [0-9]+ | \"(\" e \")\""), 12, 30, 3);
}

TEST(TokenMask, RegexWithUtf8MatchesBruteForce) {
  CheckWalks(RegexGrammar("(caf\xC3\xA9|[\xC3\xA0-\xC3\xBF]{1,3}|p?x){1,4}\\n?"), 12, 12, 4);
  CheckWalks(RegexGrammar("[^\"]{0,5}\"\xF0\x9F\x98\x80?"), 12, 10, 5);
}

TEST(TokenMask, TextUntilThenJson) {
  Grammar g;
  const std::int32_t root = g.AddRule("root");
  g.Define(root, g.Seq({g.TextUntil("<tool"), g.Literal("_call>\n"), g.Ref(JsonObjectRule(&g))}));
  g.set_root(root);
  CheckWalks(g, 8, 30, 6);
}

TEST(TokenMask, EndAndTermination) {
  const auto vocab = testing::ByteVocabulary(MixedTokens());
  const auto g = testing::Compile(RegexGrammar("ab|abc"), vocab);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.IsComplete());
  ASSERT_TRUE(m.AcceptBytes("ab"));
  EXPECT_TRUE(m.IsComplete());
  EXPECT_FALSE(m.IsTerminated()) << "c may still follow";
  ASSERT_TRUE(m.AcceptBytes("c"));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.AcceptBytes("c"));
  EXPECT_TRUE(m.IsComplete()) << "a refused token changes nothing";
  EXPECT_TRUE(ComputedAllowed(m).empty());
}

TEST(TokenMask, SpecialTokensWithoutBytesAreNeverAllowed) {
  auto vocab = std::make_shared<const Vocabulary>(std::vector<std::string>{"a", "", "b", ""});
  const auto g = testing::Compile(RegexGrammar("[ab]*"), vocab);
  GrammarMatcher m(g);
  EXPECT_EQ(ComputedAllowed(m), (std::vector<std::int32_t>{0, 2}));
  EXPECT_FALSE(m.AcceptToken(1));
}

TEST(TokenMask, StateMasksAreCachedAcrossMatchers) {
  const auto g = testing::Compile(JsonObjectGrammar(), testing::ByteVocabulary(MixedTokens()));
  for (int i = 0; i < 2; ++i) {
    GrammarMatcher m(g);
    ASSERT_TRUE(m.AcceptBytes("{\"a\": [1, {\"b\": "));
    ComputedAllowed(m);
  }
  const std::int64_t computed = g->masks_computed();
  GrammarMatcher again(g);
  ASSERT_TRUE(again.AcceptBytes("{\"a\": [1, {\"b\": "));
  ComputedAllowed(again);
  EXPECT_EQ(g->masks_computed(), computed) << "a state seen before needs no new walk";
}

}  // namespace
}  // namespace fission::grammar

namespace fission::grammar {
namespace {

TEST(GrammarCache, KeepsCompiledGrammarsWithinItsBounds) {
  auto vocab = testing::ByteVocabulary();
  GrammarCache cache(vocab, 2);
  int builds = 0;
  auto get = [&](const std::string& regex) {
    return cache.Get("regex", regex, [&] {
      ++builds;
      return RegexGrammar(regex);
    });
  };
  const auto a = get("a+");
  EXPECT_EQ(get("a+"), a) << "a hit";
  get("b+");
  get("c+");  // over two entries: "a+" was least recently used
  EXPECT_EQ(cache.size(), 2u);
  get("a+");
  EXPECT_EQ(builds, 4);
  EXPECT_THROW(get("(unclosed"), Error);
  EXPECT_EQ(cache.size(), 2u) << "a failed build keeps nothing";
  // Beyond the mask budget entries go too, the one just used excepted.
  GrammarCache small(vocab, 8, 1);
  auto x = small.Get("regex", "[a-z]+", [] { return RegexGrammar("[a-z]+"); });
  GrammarMatcher m(x);
  std::vector<std::uint32_t> mask(MaskWords(vocab->size()));
  m.FillNextTokenMask(mask);
  small.Get("regex", "[0-9]+", [] { return RegexGrammar("[0-9]+"); });
  EXPECT_EQ(small.size(), 1u);
}

}  // namespace
}  // namespace fission::grammar
