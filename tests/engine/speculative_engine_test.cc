// Speculative decoding on the real tiny checkpoint with its NextN layer
// (tests/fixtures/models/tiny-deepseek-v3, model-mtp.safetensors; tools/golden/add_mtp_layer.py):
// greedy outputs are token-identical to plain decoding whatever the drafts, the batch, the draft
// checkpoint layout or the parallel layout; sampled outputs keep plain sampling's distribution.
// The fixture's NextN layer is untrained, so its drafts are rarely accepted; OracleDraftModel
// (drafts from a plain run, some deliberately wrong) makes accepted drafts, rejected tails, stop
// strings mid-draft and page release happen on every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>

#include "engine/engine.h"
#include "engine/fake_model_testlib.h"
#include "engine/speculative_testlib.h"
#include "model/runtime/model_loader.h"

namespace fission::engine {
namespace {

using testing::Collected;
using testing::Collector;
using testing::FakeDetokenizer;
using testing::Greedy;
using testing::MakePrompt;

std::string ModelDir(const std::string& name) {
  return std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/" + name;
}

model::LoadOptions WithDraft(int tp = 1, int cp = 1) {
  model::LoadOptions o;
  o.load_draft = true;
  o.tp_size = tp;
  o.attn_cp_size = cp;
  o.pcp_min_tokens = 8;  // prompts split over the CP group, decode and verify steps do not
  return o;
}

EngineConfig Config(int steps) {
  EngineConfig c;
  c.page_size = 4;
  c.max_total_tokens = 2048;
  c.chunked_prefill_size = 16;  // long prompts run in chunks: the draft extends chunk by chunk
  if (steps > 0) {
    c.speculative.algorithm = "NEXTN";
    c.speculative.num_steps = steps;
  }
  return c;
}

using Job = testing::SpecJob;
using testing::ExpectSameTokens;
using testing::RunJobs;

std::vector<Job> GreedyJobs() {
  std::vector<Job> jobs;
  const int lengths[] = {1, 5, 23, 40, 9};
  const int outputs[] = {12, 7, 20, 3, 1};
  for (int i = 0; i < 5; ++i) jobs.push_back({MakePrompt(100 + i, lengths[i], 512), Greedy(outputs[i])});
  return jobs;
}



// A model whose drafts come from a table of known continuations (a plain run's outputs): the draft
// row at position p with input token t predicts the token after t in the sequence that has t at
// p + 1. Every `wrong_every`-th position gets a wrong draft, so runs are accepted in part. With
// `padded`, it takes padded extends (model/draft_batch.h) as the NextN layer does, and checks and
// counts their padding rows.
class OracleDraftModel : public model::CausalLM {
 public:
  OracleDraftModel(model::CausalLM* target, int wrong_every, bool padded = false)
      : target_(target), wrong_every_(wrong_every), padded_(padded) {}
  void Learn(const std::vector<std::int32_t>& sequence) { sequences_.push_back(sequence); }

  std::string architecture() const override { return target_->architecture(); }
  std::int64_t vocab_size() const override { return target_->vocab_size(); }
  std::int64_t max_position_embeddings() const override { return target_->max_position_embeddings(); }
  model::MemorySpec Memory() const override { return target_->Memory(); }
  void AllocateMemory(const model::MemoryPlan& plan) override { target_->AllocateMemory(plan); }
  model::StepLogits Forward(const model::ForwardBatch& batch) override { return target_->Forward(batch); }
  bool has_draft() const override { return true; }
  void CaptureDecodeGraphs(std::int32_t draft_steps) override {
    extend_rows_ = padded_ && draft_steps > 0 ? draft_steps + 1 : 0;
  }
  std::int32_t padded_extend_rows() const override { return extend_rows_; }
  model::StepLogits ForwardDraft(const model::DraftBatch& draft) override {
    const model::ForwardBatch& b = draft.batch;
    if (draft.source == model::DraftBatch::Source::kTarget) CheckPadding(b);
    const std::int64_t vocab = vocab_size();
    Buffer logits(DType::kF32, Shape{static_cast<std::int64_t>(b.logits_indices.size()), vocab});
    for (std::size_t r = 0; r < b.logits_indices.size(); ++r) {
      const std::int32_t i = b.logits_indices[r];
      std::int32_t guess = (b.token_ids[i] * 7 + 3) % static_cast<std::int32_t>(vocab);
      for (const auto& s : sequences_) {
        const std::size_t p = static_cast<std::size_t>(b.positions[i]);
        if (p + 2 < s.size() && s[p + 1] == b.token_ids[i]) guess = s[p + 2];
      }
      if (wrong_every_ > 0 && b.positions[i] % wrong_every_ == wrong_every_ - 1)
        guess = (guess + 1) % static_cast<std::int32_t>(vocab);
      float* row = logits.ptr<float>() + r * vocab;
      for (std::int64_t v = 0; v < vocab; ++v) row[v] = 0.0f;
      row[guess] = 1.0f;
    }
    ++draft_steps_;
    return model::StepLogits(std::move(logits));
  }
  int draft_steps() const { return draft_steps_; }
  int padded_sequences() const { return padded_sequences_; }
  int padding_rows() const { return padding_rows_; }

 private:
  // An extend's decode-row sequences: T rows (or fewer when too short to pad) at consecutive
  // positions, padding rows (token 0, slot -1) before the committed ones, the last row's logits.
  void CheckPadding(const model::ForwardBatch& b) {
    for (const model::SequenceSlice& s : b.sequences) {
      if (!s.verify) continue;
      EXPECT_GT(extend_rows_, 0) << "decode rows in an extend the model did not ask to pad";
      EXPECT_LE(s.query_len, extend_rows_);
      if (s.query_len == extend_rows_) ++padded_sequences_;
      bool committed = false;
      for (std::int32_t j = 0; j < s.query_len; ++j) {
        const std::int32_t row = s.query_start + j;
        EXPECT_EQ(b.positions[row], s.context_len + j);
        if (b.kv_slots[row] >= 0) {
          committed = true;
          continue;
        }
        EXPECT_FALSE(committed) << "a padding row after a committed one";
        EXPECT_EQ(b.token_ids[row], 0);
        ++padding_rows_;
      }
      EXPECT_TRUE(committed) << "a sequence of padding rows only";
      const std::int32_t last = s.query_start + s.query_len - 1;
      EXPECT_NE(std::find(b.logits_indices.begin(), b.logits_indices.end(), last), b.logits_indices.end());
    }
  }

  model::CausalLM* target_;
  int wrong_every_;
  bool padded_;
  std::int32_t extend_rows_ = 0;
  std::vector<std::vector<std::int32_t>> sequences_;
  int draft_steps_ = 0, padded_sequences_ = 0, padding_rows_ = 0;
};

TEST(SpeculativeEngine, GreedyOutputsMatchPlainDecoding) {
  auto plain_model = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  const std::vector<Collected> plain = RunJobs(plain_model.get(), Config(0), GreedyJobs());
  auto model = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft());
  ASSERT_TRUE(model->has_draft());
  for (int steps : {1, 3}) {
    SCOPED_TRACE(steps);
    EngineStats stats;
    ExpectSameTokens(RunJobs(model.get(), Config(steps), GreedyJobs(), &stats), plain);
    EXPECT_GT(stats.spec_verify_runs, 0);
    EXPECT_GT(stats.spec_draft_steps, 0);
  }
  // One request at a time: the batch composition does not matter either.
  for (const Job& job : GreedyJobs()) {
    const std::vector<Collected> alone = RunJobs(model.get(), Config(3), {job});
    EXPECT_EQ(alone[0].tokens, RunJobs(plain_model.get(), Config(0), {job})[0].tokens);
  }
}

TEST(SpeculativeEngine, TheNextnExportLoadsTheSameDraft) {
  model::LoadOptions options = WithDraft();
  options.draft_model_path = ModelDir("tiny-deepseek-v3-nextn");
  auto from_export = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"), options);
  auto own = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft());
  EngineStats a, b;
  ExpectSameTokens(RunJobs(from_export.get(), Config(3), GreedyJobs(), &a), RunJobs(own.get(), Config(3), GreedyJobs(), &b));
  // The same drafts: the same verify runs and acceptances.
  EXPECT_EQ(a.spec_draft_tokens, b.spec_draft_tokens);
  EXPECT_EQ(a.spec_accepted_tokens, b.spec_accepted_tokens);
}

TEST(SpeculativeEngine, ParallelLayoutsMatchPlainDecoding) {
  auto plain_model = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  const std::vector<Collected> plain = RunJobs(plain_model.get(), Config(0), GreedyJobs());
  EngineStats one;
  auto single = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft());
  RunJobs(single.get(), Config(2), GreedyJobs(), &one);
  for (auto [tp, cp] : {std::pair{2, 1}, std::pair{2, 2}}) {
    SCOPED_TRACE(StrCat("tp ", tp, " cp ", cp));
    auto model = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"), WithDraft(tp, cp));
    EngineStats stats;
    ExpectSameTokens(RunJobs(model.get(), Config(2), GreedyJobs(), &stats), plain);
    EXPECT_EQ(stats.spec_draft_tokens, one.spec_draft_tokens);
  }
}

TEST(SpeculativeEngine, AcceptedDraftsKeepOutputsAndReleaseRejectedPages) {
  auto target = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  std::vector<Job> jobs = GreedyJobs();
  const std::vector<Collected> plain = RunJobs(target.get(), Config(0), jobs);
  for (int wrong_every : {0, 3}) {
    SCOPED_TRACE(wrong_every);
    OracleDraftModel oracle(target.get(), wrong_every);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      std::vector<std::int32_t> all = jobs[i].prompt;
      all.insert(all.end(), plain[i].tokens.begin(), plain[i].tokens.end());
      oracle.Learn(all);
    }
    for (int steps : {1, 3}) {
      EngineStats stats;
      ExpectSameTokens(RunJobs(&oracle, Config(steps), jobs, &stats), plain);
      EXPECT_GT(stats.spec_accepted_tokens, 0);
      if (wrong_every == 0) {
        EXPECT_EQ(stats.spec_accepted_tokens, stats.spec_draft_tokens);
      } else {
        EXPECT_LT(stats.spec_accepted_tokens, stats.spec_draft_tokens);
      }
      EXPECT_GT(stats.spec_accept_length(), 1.0);
      EXPECT_LE(stats.spec_accept_length(), steps + 1.0);
    }
  }
}

// The engine pads the extends after verify runs for a model that asks (the NextN layer, whose
// padded extends run as graph replays): the drafts come from each sequence's last committed row
// as before, so outputs, drafts and acceptance are those of unpadded extends.
TEST(SpeculativeEngine, PaddedExtendsKeepTheDrafts) {
  auto target = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  std::vector<Job> jobs = GreedyJobs();
  const std::vector<Collected> plain = RunJobs(target.get(), Config(0), jobs);
  for (int steps : {1, 3}) {
    SCOPED_TRACE(steps);
    OracleDraftModel unpadded(target.get(), 3), padded(target.get(), 3, /*padded=*/true);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      std::vector<std::int32_t> all = jobs[i].prompt;
      all.insert(all.end(), plain[i].tokens.begin(), plain[i].tokens.end());
      unpadded.Learn(all);
      padded.Learn(all);
    }
    EngineStats a, b;
    ExpectSameTokens(RunJobs(&padded, Config(steps), jobs, &a), plain);
    RunJobs(&unpadded, Config(steps), jobs, &b);
    EXPECT_EQ(a.spec_verify_runs, b.spec_verify_runs);
    EXPECT_EQ(a.spec_draft_tokens, b.spec_draft_tokens);
    EXPECT_EQ(a.spec_accepted_tokens, b.spec_accepted_tokens);
    EXPECT_EQ(a.spec_draft_steps, b.spec_draft_steps);
    EXPECT_GT(padded.padded_sequences(), 0);
    EXPECT_GT(padded.padding_rows(), 0);
    EXPECT_EQ(unpadded.padded_sequences(), 0);
  }
}

TEST(SpeculativeEngine, StopStringsAndLogprobsMidDraft) {
  auto target = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  const FakeDetokenizer detok;
  std::vector<Job> jobs = GreedyJobs();
  const std::vector<Collected> full = RunJobs(target.get(), Config(0), jobs, nullptr, &detok);
  // Stop at a piece of the fourth output token of each long output, and ask for logprobs.
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    jobs[i].params.logprobs = true;
    jobs[i].params.top_logprobs = 2;
    if (full[i].tokens.size() > 6) jobs[i].params.stop = {FakeDetokenizer::Piece(full[i].tokens[4])};
  }
  const std::vector<Collected> plain = RunJobs(target.get(), Config(0), jobs, nullptr, &detok);
  OracleDraftModel oracle(target.get(), 0);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    std::vector<std::int32_t> all = jobs[i].prompt;
    all.insert(all.end(), full[i].tokens.begin(), full[i].tokens.end());
    oracle.Learn(all);
  }
  const std::vector<Collected> spec = RunJobs(&oracle, Config(3), jobs, nullptr, &detok);
  ExpectSameTokens(spec, plain);
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(spec[i].matched_stop_string, plain[i].matched_stop_string);
    ASSERT_EQ(spec[i].logprobs.size(), plain[i].logprobs.size());
    for (std::size_t t = 0; t < plain[i].logprobs.size(); ++t) {
      EXPECT_EQ(spec[i].logprobs[t].token_id, plain[i].logprobs[t].token_id);
      EXPECT_FLOAT_EQ(spec[i].logprobs[t].logprob, plain[i].logprobs[t].logprob);
      ASSERT_EQ(spec[i].logprobs[t].top.size(), 2u);
      EXPECT_EQ(spec[i].logprobs[t].top[0].token_id, plain[i].logprobs[t].top[0].token_id);
    }
  }
  EXPECT_TRUE(std::any_of(plain.begin(), plain.end(), [](const Collected& c) { return c.matched_stop_string; }));
}

// Sampled outputs: the joint distribution of the first two generated tokens (the second is the
// first a verify run produces) with drafts that are often accepted, against plain sampling,
// by a two-sample chi-square over fixed seeds.
TEST(SpeculativeEngine, SampledOutputsKeepTheirDistribution) {
  auto target = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  const std::vector<std::int32_t> prompt = MakePrompt(7, 6, 512);
  auto jobs = [&] {
    std::vector<Job> out;
    for (int s = 0; s < 240; ++s) {
      SamplingParams p;
      p.temperature = 1.0;
      p.top_k = 3;
      p.max_new_tokens = 3;  // the third lets the second token be a verify run's (one draft)
      p.ignore_eos = true;
      p.seed = 1000 + s;
      out.push_back({prompt, p});
    }
    return out;
  }();
  std::map<std::pair<int, int>, std::array<int, 2>> counts;
  const std::vector<Collected> plain = RunJobs(target.get(), Config(0), jobs);
  // The oracle drafts the most frequent continuation of each first token.
  OracleDraftModel oracle(target.get(), 0);
  std::map<int, std::map<int, int>> follow;
  for (const Collected& c : plain) ++follow[c.tokens[0]][c.tokens[1]];
  for (const auto& [first, nexts] : follow) {
    int best = nexts.begin()->first;
    for (const auto& [t, n] : nexts)
      if (n > nexts.at(best)) best = t;
    std::vector<std::int32_t> s = prompt;
    s.push_back(first);
    s.push_back(best);
    oracle.Learn(s);
  }
  // Other seeds for the speculative run: the samples are independent.
  for (Job& j : jobs) j.params.seed = *j.params.seed + 5000;
  EngineStats stats;
  const std::vector<Collected> spec = RunJobs(&oracle, Config(1), jobs, &stats);
  EXPECT_GT(stats.spec_accepted_tokens, 0);
  EXPECT_LT(stats.spec_accepted_tokens, stats.spec_draft_tokens);
  for (const Collected& c : plain) ++counts[{c.tokens[0], c.tokens[1]}][0];
  for (const Collected& c : spec) ++counts[{c.tokens[0], c.tokens[1]}][1];
  double chi2 = 0.0;
  int cells = 0;
  for (const auto& [pair, n] : counts) {
    const double total = n[0] + n[1];
    for (int k = 0; k < 2; ++k) chi2 += (n[k] - total / 2) * (n[k] - total / 2) / (total / 2);
    ++cells;
  }
  // At most 9 cells (top_k 3 twice): df <= 8, whose 0.999 quantile is 26.1.
  EXPECT_LE(cells, 9);
  EXPECT_LT(chi2, 26.1) << "cells " << cells;
}

TEST(SpeculativeEngine, RefusesWhatItCannotRun) {
  auto plain = model::LoadCausalLM(ModelDir("tiny-deepseek-v3"));
  EXPECT_THROW({ Engine engine(plain.get(), Config(3)); }, Error);  // no draft layer loaded
  EngineConfig c = Config(3);
  c.speculative.algorithm = "NGRAM";
  EXPECT_THROW(c.Validate(), Error);
  c = Config(3);
  c.speculative.eagle_topk = 4;
  EXPECT_THROW(c.Validate(), Error);
  c = Config(3);
  c.speculative.num_draft_tokens = 8;
  EXPECT_THROW(c.Validate(), Error);
  // A checkpoint without a NextN layer, named before any weight is read.
  model::LoadOptions o = WithDraft();
  o.draft_model_path = ModelDir("tiny-deepseek-v32");
  try {
    model::LoadCausalLM(ModelDir("tiny-deepseek-v3"), o);
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model_type"), std::string::npos) << e.what();
  }
  try {
    model::LoadCausalLM(ModelDir("tiny-deepseek-v32"), WithDraft());
    ADD_FAILURE() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no NextN draft layer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace fission::engine
