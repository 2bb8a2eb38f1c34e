// Sampling parameters end to end through the engine: each one changes the output the way it
// should (so each test fails if the parameter is ignored), and seeded sampling is reproducible
// whatever else runs in the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <map>
#include <set>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"

namespace fission::engine {
namespace {

using testing::Collected;
using testing::Collector;
using testing::FakeCausalLM;
using testing::FakeDetokenizer;
using testing::Greedy;
using testing::MakePrompt;

EngineConfig Config() {
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 4096;
  return c;
}

// Runs one request alone and returns what it produced (index 0, or all with n > 1).
std::vector<Collected> RunOne(FakeCausalLM& model, const std::vector<std::int32_t>& prompt, const SamplingParams& params,
                              EngineConfig config = Config()) {
  FakeDetokenizer detok;
  Engine engine(&model, config, &detok);
  Collector collector;
  const auto id = collector.Submit(engine, prompt, params);
  engine.RunUntilIdle();
  EXPECT_EQ(engine.CheckPageAccounting(), "");
  return collector.results(id);
}

// Greedy decoding with penalties, straight from the reference logits.
std::vector<std::int32_t> ReferencePenalized(const FakeCausalLM& model, const std::vector<std::int32_t>& prompt,
                                             int max_new, double repetition, double frequency, double presence) {
  std::vector<std::int32_t> tokens = prompt, out;
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < max_new; ++i) {
    std::vector<float> logits = model.ReferenceLogits(tokens);
    std::set<std::int32_t> seen(tokens.begin(), tokens.end());
    if (repetition != 1.0)
      for (std::int32_t t : seen) logits[t] = logits[t] > 0 ? logits[t] / static_cast<float>(repetition) : logits[t] * static_cast<float>(repetition);
    for (auto [t, c] : counts) logits[t] -= static_cast<float>(frequency * c + (c > 0 ? presence : 0.0));
    std::int32_t best = 0;
    for (std::size_t v = 1; v < logits.size(); ++v)
      if (logits[v] > logits[best]) best = static_cast<std::int32_t>(v);
    tokens.push_back(best);
    out.push_back(best);
    ++counts[best];
  }
  return out;
}

SamplingParams Sampled(std::uint64_t seed, int max_new = 20) {
  SamplingParams p;
  p.temperature = 1.0;
  p.seed = seed;
  p.max_new_tokens = max_new;
  p.ignore_eos = true;
  return p;
}

class SamplingEngineTest : public ::testing::Test {
 protected:
  FakeCausalLM model_;
  std::vector<std::int32_t> prompt_ = MakePrompt(42, 23, 101);
  std::vector<std::int32_t> greedy_ = model_.ReferenceGreedy(prompt_, 20);
};

TEST_F(SamplingEngineTest, MaxNewTokens) {
  EXPECT_EQ(RunOne(model_, prompt_, Greedy(7))[0].tokens, model_.ReferenceGreedy(prompt_, 7));
  const auto zero = RunOne(model_, prompt_, Greedy(0))[0];
  EXPECT_TRUE(zero.tokens.empty());
  EXPECT_EQ(zero.finish_reason, FinishReason::kLength);
}

TEST_F(SamplingEngineTest, TemperatureSamplesAwayFromGreedyAndZeroIsGreedy) {
  EXPECT_NE(RunOne(model_, prompt_, Sampled(1))[0].tokens, greedy_);
  SamplingParams cold = Sampled(1);
  cold.temperature = 1e-4;
  EXPECT_EQ(RunOne(model_, prompt_, cold)[0].tokens, greedy_);
}

TEST_F(SamplingEngineTest, TopKOneTopPTinyAndMinPOneAreGreedy) {
  SamplingParams k = Sampled(1);
  k.top_k = 1;
  EXPECT_EQ(RunOne(model_, prompt_, k)[0].tokens, greedy_);
  SamplingParams p = Sampled(1);
  p.top_p = 1e-6;
  EXPECT_EQ(RunOne(model_, prompt_, p)[0].tokens, greedy_);
  SamplingParams m = Sampled(1);
  m.min_p = 1.0;
  EXPECT_EQ(RunOne(model_, prompt_, m)[0].tokens, greedy_);
}

TEST_F(SamplingEngineTest, TopKRestrictsEachTokenToTheKMostLikely) {
  SamplingParams k = Sampled(3, 30);
  k.top_k = 3;
  k.temperature = 5.0;  // flat enough that unrestricted sampling leaves the top 3 often
  const auto tokens = RunOne(model_, prompt_, k)[0].tokens;
  auto ranks_ok = [&](const std::vector<std::int32_t>& out, int top) {
    std::vector<std::int32_t> seq = prompt_;
    for (std::int32_t t : out) {
      const std::vector<float> logits = model_.ReferenceLogits(seq);
      int rank = 0;
      for (float l : logits) rank += l > logits[t];
      if (rank >= top) return false;
      seq.push_back(t);
    }
    return true;
  };
  EXPECT_TRUE(ranks_ok(tokens, 3));
  SamplingParams free = k;
  free.top_k = -1;
  EXPECT_FALSE(ranks_ok(RunOne(model_, prompt_, free)[0].tokens, 3));
}

TEST_F(SamplingEngineTest, SeededSamplingIsReproducibleWhateverTheBatch) {
  SamplingParams p = Sampled(99, 25);
  p.top_p = 0.9;
  p.top_k = 50;
  const auto alone = RunOne(model_, prompt_, p)[0].tokens;
  // The same request in a crowded, chunked engine, submitted after others.
  EngineConfig c = Config();
  c.chunked_prefill_size = 5;
  Engine engine(&model_, c);
  Collector collector;
  for (int i = 0; i < 6; ++i) collector.Submit(engine, MakePrompt(i, 17 + i, 101), Sampled(i + 1000, 30));
  engine.Step();
  const auto id = collector.Submit(engine, prompt_, p);
  engine.RunUntilIdle();
  EXPECT_EQ(collector.results(id)[0].tokens, alone);
  // Another seed, another output.
  SamplingParams other = p;
  other.seed = 100;
  EXPECT_NE(RunOne(model_, prompt_, other)[0].tokens, alone);
  // Without a seed the engine's --random-seed decides.
  SamplingParams unseeded = p;
  unseeded.seed.reset();
  EngineConfig s1 = Config(), s2 = Config();
  s1.random_seed = 1;
  s2.random_seed = 2;
  EXPECT_EQ(RunOne(model_, prompt_, unseeded, s1)[0].tokens, RunOne(model_, prompt_, unseeded, s1)[0].tokens);
  EXPECT_NE(RunOne(model_, prompt_, unseeded, s1)[0].tokens, RunOne(model_, prompt_, unseeded, s2)[0].tokens);
}

TEST_F(SamplingEngineTest, SeededSamplingSurvivesPreemption) {
  EngineConfig tiny = Config();
  tiny.max_total_tokens = 64;
  std::vector<std::vector<std::int32_t>> alone;
  for (int i = 0; i < 6; ++i) alone.push_back(RunOne(model_, MakePrompt(i, 20, 101), Sampled(i, 30))[0].tokens);
  Engine engine(&model_, tiny);
  Collector collector;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(collector.Submit(engine, MakePrompt(i, 20, 101), Sampled(i, 30)));
  engine.RunUntilIdle();
  EXPECT_GT(engine.stats().preemptions, 0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(collector.results(ids[i])[0].tokens, alone[i]) << i;
}

TEST_F(SamplingEngineTest, NGivesIndependentCompletions) {
  SamplingParams p = Sampled(5);
  p.n = 3;
  const auto results = RunOne(model_, prompt_, p);
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    EXPECT_EQ(r.tokens.size(), 20u);
    EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  }
  EXPECT_NE(results[0].tokens, results[1].tokens);
  EXPECT_NE(results[1].tokens, results[2].tokens);
  // Completion 0 is the same as the request with n = 1.
  EXPECT_EQ(results[0].tokens, RunOne(model_, prompt_, Sampled(5))[0].tokens);
}

TEST_F(SamplingEngineTest, NCompletionsComputeThePromptOnce) {
  const auto prompt = MakePrompt(8, 61, 101);  // 15 full pages of 4 and one token
  SamplingParams p = Sampled(5, 6);
  p.n = 4;
  std::vector<std::vector<std::int32_t>> expected;
  for (bool disable_cache : {true, false}) {
    EngineConfig c = Config();
    c.disable_radix_cache = disable_cache;
    FakeDetokenizer detok;
    Engine engine(&model_, c, &detok);
    Collector collector;
    const auto id = collector.Submit(engine, prompt, p);
    engine.RunUntilIdle();
    std::vector<std::vector<std::int32_t>> got;
    for (const auto& r : collector.results(id)) got.push_back(r.tokens);
    if (disable_cache) {
      expected = got;
      EXPECT_EQ(engine.stats().computed_prompt_tokens, 4 * 61);
    } else {
      EXPECT_EQ(got, expected);
      // Completions 1..3 reuse the 60 cached prompt tokens and compute only the last one.
      EXPECT_EQ(engine.stats().computed_prompt_tokens, 61 + 3 * 1);
      EXPECT_EQ(collector.results(id)[3].cached_tokens, 60);
    }
    EXPECT_EQ(engine.CheckPageAccounting(), "");
  }
}

TEST_F(SamplingEngineTest, AbortingAnNRequestFinishesTheHeldCompletions) {
  SamplingParams p = Sampled(5, 6);
  p.n = 3;
  FakeDetokenizer detok;
  Engine engine(&model_, Config(), &detok);
  Collector collector;
  const auto id = collector.Submit(engine, MakePrompt(9, 40, 101), p);
  engine.Abort(id);
  engine.RunUntilIdle();
  for (const auto& r : collector.results(id)) {
    EXPECT_EQ(r.finish_reason, FinishReason::kAbort);
    EXPECT_EQ(r.finished_reports, 1);
  }
  EXPECT_FALSE(engine.HasWork());
}

TEST_F(SamplingEngineTest, EosStopsUnlessIgnored) {
  EngineConfig c = Config();
  c.eos_token_ids = {greedy_[2]};
  SamplingParams p = Greedy(20);
  p.ignore_eos = false;
  const auto stopped = RunOne(model_, prompt_, p, c)[0];
  EXPECT_EQ(stopped.tokens, std::vector<std::int32_t>(greedy_.begin(), greedy_.begin() + 3));
  EXPECT_EQ(stopped.finish_reason, FinishReason::kStop);
  EXPECT_EQ(stopped.matched_stop_token, greedy_[2]);
  p.ignore_eos = true;
  EXPECT_EQ(RunOne(model_, prompt_, p, c)[0].tokens, greedy_);
}

TEST_F(SamplingEngineTest, StopTokenIds) {
  SamplingParams p = Greedy(20);
  p.stop_token_ids = {greedy_[4]};
  const auto r = RunOne(model_, prompt_, p)[0];
  const auto first = std::find(greedy_.begin(), greedy_.end(), greedy_[4]);
  EXPECT_EQ(r.tokens, std::vector<std::int32_t>(greedy_.begin(), first + 1));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
}

TEST_F(SamplingEngineTest, MinNewTokensDelaysEos) {
  EngineConfig c = Config();
  c.eos_token_ids = {greedy_[0]};
  SamplingParams p = Greedy(20);
  p.ignore_eos = false;
  EXPECT_EQ(RunOne(model_, prompt_, p, c)[0].tokens.size(), 1u);
  p.min_new_tokens = 6;
  const auto r = RunOne(model_, prompt_, p, c)[0];
  ASSERT_GE(r.tokens.size(), 6u);
  EXPECT_NE(r.tokens[0], greedy_[0]);
  for (std::size_t i = 0; i + 1 < r.tokens.size(); ++i) EXPECT_NE(r.tokens[i], greedy_[0]);
}

TEST_F(SamplingEngineTest, StopStringsMatchAcrossTokenBoundariesAndAreExcluded) {
  const std::string text = FakeDetokenizer().Decode(greedy_);
  // A stop string that starts inside token 5's piece and ends inside a later one.
  std::size_t start = 0;
  for (int i = 0; i < 5; ++i) start += FakeDetokenizer::Piece(greedy_[i]).size();
  const std::size_t piece5 = FakeDetokenizer::Piece(greedy_[5]).size();
  const std::string stop = text.substr(start + piece5 - 1, 3);
  const std::size_t at = text.find(stop);
  SamplingParams p = Greedy(20);
  p.stop = {"never-there", stop};
  const auto r = RunOne(model_, prompt_, p)[0];
  EXPECT_EQ(r.text, text.substr(0, at));
  EXPECT_EQ(r.finish_reason, FinishReason::kStop);
  EXPECT_EQ(r.matched_stop_string, stop);
  EXPECT_LT(r.tokens.size(), greedy_.size());
  // Without the stop string the text runs on.
  EXPECT_EQ(RunOne(model_, prompt_, Greedy(20))[0].text, text);
}

TEST_F(SamplingEngineTest, StreamedTextNeverShowsAStopStringPrefixEarly) {
  const std::string text = FakeDetokenizer().Decode(greedy_);
  const std::string stop = text.substr(text.size() - 4) + "~";  // never completes
  FakeDetokenizer detok;
  Engine engine(&model_, Config(), &detok);
  std::vector<std::string> deltas;
  Request r;
  r.prompt_ids = prompt_;
  r.params = Greedy(20);
  r.params.stop = {stop};
  r.callback = [&](const RequestOutput& out) { deltas.push_back(out.text); };
  engine.Submit(std::move(r));
  engine.RunUntilIdle();
  std::string joined;
  for (const auto& d : deltas) joined += d;
  EXPECT_EQ(joined, text);
  // Before the final report the tail that could begin the stop string was held back.
  EXPECT_EQ(deltas.back(), text.substr(text.size() - 4));
}

TEST_F(SamplingEngineTest, RepetitionPenaltyChangesGreedyAsSpecified) {
  SamplingParams p = Greedy(20);
  p.repetition_penalty = 1.8;
  const auto tokens = RunOne(model_, prompt_, p)[0].tokens;
  EXPECT_EQ(tokens, ReferencePenalized(model_, prompt_, 20, 1.8, 0, 0));
  EXPECT_NE(tokens, greedy_);
}

TEST_F(SamplingEngineTest, FrequencyAndPresencePenaltiesChangeGreedyAsSpecified) {
  // A prompt whose greedy continuation repeats tokens, so the penalties bite.
  SamplingParams f = Greedy(40);
  f.frequency_penalty = 1.5;
  const auto plain = model_.ReferenceGreedy(prompt_, 40);
  const auto freq = RunOne(model_, prompt_, f)[0].tokens;
  EXPECT_EQ(freq, ReferencePenalized(model_, prompt_, 40, 1.0, 1.5, 0));
  EXPECT_NE(freq, plain);
  SamplingParams pr = Greedy(40);
  pr.presence_penalty = 1.5;
  const auto pres = RunOne(model_, prompt_, pr)[0].tokens;
  EXPECT_EQ(pres, ReferencePenalized(model_, prompt_, 40, 1.0, 0, 1.5));
  EXPECT_NE(pres, plain);
}

TEST_F(SamplingEngineTest, LogprobsOfGeneratedTokens) {
  SamplingParams p = Greedy(10);
  p.logprobs = true;
  p.top_logprobs = 3;
  const auto r = RunOne(model_, prompt_, p)[0];
  ASSERT_EQ(r.logprobs.size(), 10u);
  std::vector<std::int32_t> seq = prompt_;
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    const std::vector<float> logits = model_.ReferenceLogits(seq);
    double z = 0;
    for (float l : logits) z += std::exp(static_cast<double>(l));
    EXPECT_EQ(r.logprobs[i].token_id, r.tokens[i]);
    EXPECT_NEAR(r.logprobs[i].logprob, logits[r.tokens[i]] - std::log(z), 1e-4);
    ASSERT_EQ(r.logprobs[i].top.size(), 3u);
    EXPECT_EQ(r.logprobs[i].top[0].token_id, r.tokens[i]);
    EXPECT_GE(r.logprobs[i].top[1].logprob, r.logprobs[i].top[2].logprob);
    seq.push_back(r.tokens[i]);
  }
  EXPECT_TRUE(RunOne(model_, prompt_, Greedy(10))[0].logprobs.empty());
}

TEST_F(SamplingEngineTest, PromptLogprobsEvenWithChunkingAndACachedPrefix) {
  SamplingParams p = Greedy(2);
  p.prompt_logprobs = true;
  p.top_logprobs = 2;
  auto check = [&](const Collected& r) {
    ASSERT_EQ(r.prompt_logprobs.size(), prompt_.size() - 1);
    for (std::size_t i = 1; i < prompt_.size(); ++i) {
      const std::vector<float> logits = model_.ReferenceLogits(std::vector<std::int32_t>(prompt_.begin(), prompt_.begin() + i));
      double z = 0;
      for (float l : logits) z += std::exp(static_cast<double>(l));
      EXPECT_EQ(r.prompt_logprobs[i - 1].token_id, prompt_[i]);
      EXPECT_NEAR(r.prompt_logprobs[i - 1].logprob, logits[prompt_[i]] - std::log(z), 1e-4);
      EXPECT_EQ(r.prompt_logprobs[i - 1].top.size(), 2u);
    }
    EXPECT_EQ(r.tokens, model_.ReferenceGreedy(prompt_, 2));
  };
  check(RunOne(model_, prompt_, p)[0]);
  EngineConfig chunked = Config();
  chunked.chunked_prefill_size = 7;
  check(RunOne(model_, prompt_, p, chunked)[0]);
  // A cached prefix is recomputed for a request that asks for prompt logprobs.
  FakeDetokenizer detok;
  Engine engine(&model_, Config(), &detok);
  Collector collector;
  collector.Submit(engine, prompt_, Greedy(2));
  engine.RunUntilIdle();
  const auto id = collector.Submit(engine, prompt_, p);
  engine.RunUntilIdle();
  check(collector.results(id)[0]);
  EXPECT_TRUE(RunOne(model_, prompt_, Greedy(2))[0].prompt_logprobs.empty());
}

}  // namespace
}  // namespace fission::engine
