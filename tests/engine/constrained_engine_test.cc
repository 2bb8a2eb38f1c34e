// Structured outputs through the engine with a fake constraint: the allowed tokens reach the
// sampler every step, each sampled token advances the sequence's own matcher, end tokens come only
// where the output is complete, and a finished constraint ends the sequence, through preemption,
// n > 1, sampling, logprobs and max_new_tokens alike.
#include <gtest/gtest.h>

#include <set>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::Collected;
using testing::Collector;
using testing::FakeCausalLM;
using testing::Greedy;
using testing::MakePrompt;

constexpr std::int32_t kVocab = 101;
constexpr std::int32_t kEos = 100;  // never allowed by the constraint itself
constexpr std::int32_t kPeriod = 3;

// Step i allows the tokens t < kEos with t % kPeriod == i % kPeriod; the output is complete after
// `complete_at` tokens and admits nothing after `end_at`; `dead_at` makes the mask empty there.
struct Rule {
  int complete_at = 4;
  int end_at = 12;
  int dead_at = -1;
  bool Allows(int step, std::int32_t t) const {
    return step < end_at && step != dead_at && t < kEos && t % kPeriod == step % kPeriod;
  }
};

class CyclicMatcher : public TokenMatcher {
 public:
  explicit CyclicMatcher(Rule rule) : rule_(rule) {}
  void FillNextTokenMask(std::span<std::uint32_t> mask) override {
    for (std::int32_t t = 0; t < kVocab; ++t)
      if (rule_.Allows(step_, t)) mask[t >> 5] |= 1u << (t & 31);
  }
  bool Accept(std::int32_t token) override {
    if (!rule_.Allows(step_, token)) return false;
    ++step_;
    return true;
  }
  bool IsComplete() const override { return step_ >= rule_.complete_at; }
  bool IsTerminated() const override { return step_ >= rule_.end_at; }

 private:
  Rule rule_;
  int step_ = 0;
};

class CyclicConstraint : public TokenConstraint {
 public:
  explicit CyclicConstraint(Rule rule) : rule_(rule) {}
  std::unique_ptr<TokenMatcher> NewMatcher() const override { return std::make_unique<CyclicMatcher>(rule_); }
  std::string Describe() const override { return "cyclic"; }

 private:
  Rule rule_;
};

EngineConfig Config() {
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 4096;
  c.eos_token_ids = {kEos};
  return c;
}

SamplingParams Constrained(Rule rule, int max_new_tokens = 40) {
  SamplingParams p = Greedy(max_new_tokens);
  p.ignore_eos = false;
  p.constraint = std::make_shared<CyclicConstraint>(rule);
  return p;
}

// Greedy decoding of the reference logits under the rule (EOS allowed once complete).
std::vector<std::int32_t> Reference(const FakeCausalLM& model, const std::vector<std::int32_t>& prompt, Rule rule,
                                    int max_new) {
  std::vector<std::int32_t> tokens = prompt, out;
  for (int step = 0; step < max_new && step < rule.end_at; ++step) {
    const std::vector<float> logits = model.ReferenceLogits(tokens);
    std::int32_t best = -1;
    for (std::int32_t t = 0; t < kVocab; ++t) {
      const bool allowed = rule.Allows(step, t) || (t == kEos && step >= rule.complete_at);
      if (allowed && (best < 0 || logits[t] > logits[best])) best = t;
    }
    out.push_back(best);
    if (best == kEos) break;
    tokens.push_back(best);
  }
  return out;
}

void ExpectObeys(const std::vector<std::int32_t>& tokens, Rule rule) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == kEos) {
      EXPECT_EQ(i + 1, tokens.size()) << "EOS ends the output";
      EXPECT_GE(static_cast<int>(i), rule.complete_at) << "EOS only where the output is complete";
      continue;
    }
    EXPECT_TRUE(rule.Allows(static_cast<int>(i), tokens[i])) << "token " << i << " = " << tokens[i];
  }
}

TEST(ConstrainedEngine, GreedyOutputFollowsTheMaskAndEndsWhereTheConstraintDoes) {
  FakeCausalLM model(kVocab);
  Engine engine(&model, Config());
  Collector collector;
  const Rule rule;
  std::vector<std::int64_t> ids;
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 6; ++i) {
    prompts.push_back(MakePrompt(10 + i, 7 + i, kVocab));
    ids.push_back(collector.Submit(engine, prompts.back(), Constrained(rule)));
  }
  engine.RunUntilIdle();
  EXPECT_EQ(engine.CheckPageAccounting(), "");
  int ended_by_eos = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Collected& r = collector.results(ids[i])[0];
    EXPECT_EQ(r.tokens, Reference(model, prompts[i], rule, 40)) << "request " << i;
    ExpectObeys(r.tokens, rule);
    EXPECT_EQ(r.finish_reason, FinishReason::kStop) << "EOS or the constraint's end";
    ended_by_eos += !r.tokens.empty() && r.tokens.back() == kEos;
    if (r.tokens.back() != kEos) {
      EXPECT_EQ(static_cast<int>(r.tokens.size()), rule.end_at) << "the constraint's end";
    }
  }
  EXPECT_GT(ended_by_eos, 0) << "some request samples EOS once its output is complete";
  EXPECT_GT(engine.stats().masks, 0);
}

TEST(ConstrainedEngine, PreemptionAndRecomputeKeepTheMatcher) {
  FakeCausalLM model(kVocab);
  const Rule rule{.complete_at = 30, .end_at = 30};
  std::vector<std::vector<std::int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(MakePrompt(50 + i, 12 + i, kVocab));
  EngineConfig c = Config();
  c.max_total_tokens = 64;  // one request fits alone: the others get preempted
  Engine engine(&model, c);
  Collector collector;
  std::vector<std::int64_t> ids;
  for (const auto& p : prompts) ids.push_back(collector.Submit(engine, p, Constrained(rule, 24)));
  while (engine.HasWork()) {
    engine.Step();
    ASSERT_EQ(engine.CheckPageAccounting(), "");
  }
  EXPECT_GT(engine.stats().preemptions, 0);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const Collected& r = collector.results(ids[i])[0];
    EXPECT_EQ(r.tokens, Reference(model, prompts[i], rule, 24)) << "request " << i;
    EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  }
}

TEST(ConstrainedEngine, EachCompletionHasItsOwnMatcher) {
  FakeCausalLM model(kVocab);
  Engine engine(&model, Config());
  Collector collector;
  const Rule rule{.complete_at = 9, .end_at = 9};
  SamplingParams p = Constrained(rule);
  p.temperature = 1.0;
  p.seed = 3;
  p.n = 4;
  p.logprobs = true;
  p.top_logprobs = 5;
  const auto id = collector.Submit(engine, MakePrompt(7, 9, kVocab), p);
  engine.RunUntilIdle();
  std::set<std::vector<std::int32_t>> distinct;
  for (const Collected& r : collector.results(id)) {
    ASSERT_EQ(r.tokens.size(), 9u);
    ExpectObeys(r.tokens, rule);
    distinct.insert(r.tokens);
    ASSERT_EQ(r.logprobs.size(), r.tokens.size());
    for (std::size_t i = 0; i < r.logprobs.size(); ++i)
      for (const TopLogprob& alt : r.logprobs[i].top)
        EXPECT_TRUE(rule.Allows(static_cast<int>(i), alt.token_id)) << "alternatives come from the allowed tokens";
  }
  EXPECT_GT(distinct.size(), 1u) << "sampled completions differ";
}

TEST(ConstrainedEngine, MaxNewTokensCutsAnIncompleteOutput) {
  FakeCausalLM model(kVocab);
  Engine engine(&model, Config());
  Collector collector;
  const auto id = collector.Submit(engine, MakePrompt(1, 5, kVocab), Constrained(Rule{}, 3));
  engine.RunUntilIdle();
  const Collected& r = collector.results(id)[0];
  EXPECT_EQ(r.tokens.size(), 3u);
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
}

TEST(ConstrainedEngine, StopStringsEndAConstrainedOutputEarly) {
  FakeCausalLM model(kVocab);
  testing::FakeDetokenizer detok;
  Engine engine(&model, Config(), &detok);
  Collector collector;
  const Rule rule;
  const std::vector<std::int32_t> prompt = MakePrompt(5, 6, kVocab);
  const std::vector<std::int32_t> expected = Reference(model, prompt, rule, 40);
  SamplingParams p = Constrained(rule);
  p.stop = {testing::FakeDetokenizer::Piece(expected[2])};
  const auto id = collector.Submit(engine, prompt, p);
  engine.RunUntilIdle();
  const Collected& r = collector.results(id)[0];
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.matched_stop_string, p.stop[0]);
  ASSERT_LE(r.tokens.size(), 3u);
  EXPECT_EQ(r.tokens, std::vector<std::int32_t>(expected.begin(), expected.begin() + r.tokens.size()));
}

TEST(ConstrainedEngine, MinNewTokensHoldsEosBackButNotTheConstraintsEnd) {
  FakeCausalLM model(kVocab);
  Engine engine(&model, Config());
  Collector collector;
  SamplingParams p = Constrained(Rule{.complete_at = 1, .end_at = 6});
  p.min_new_tokens = 20;
  const auto id = collector.Submit(engine, MakePrompt(2, 5, kVocab), p);
  engine.RunUntilIdle();
  const Collected& r = collector.results(id)[0];
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_EQ(std::count(r.tokens.begin(), r.tokens.end(), kEos), 0);
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
}

TEST(ConstrainedEngine, AnEmptyMaskAbortsWithAMessage) {
  FakeCausalLM model(kVocab);
  Engine engine(&model, Config());
  Collector collector;
  const auto id = collector.Submit(engine, MakePrompt(3, 5, kVocab), Constrained(Rule{.dead_at = 2}));
  engine.RunUntilIdle();
  const Collected& r = collector.results(id)[0];
  EXPECT_EQ(r.finish_reason, FinishReason::kAbort);
  EXPECT_NE(r.error.find("cannot continue"), std::string::npos) << r.error;
  EXPECT_EQ(r.tokens.size(), 2u) << "the token the empty mask produced is not kept";
  EXPECT_EQ(engine.CheckPageAccounting(), "");
}

TEST(ConstrainedEngine, AConstraintOfTheEmptyOutputFinishesAtOnce) {
  FakeCausalLM model(kVocab);
  Engine engine(&model, Config());
  Collector collector;
  const auto id = collector.Submit(engine, MakePrompt(4, 5, kVocab), Constrained(Rule{.complete_at = 0, .end_at = 0}));
  engine.RunUntilIdle();
  const Collected& r = collector.results(id)[0];
  EXPECT_TRUE(r.tokens.empty());
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
}

}  // namespace
}  // namespace fission::engine
