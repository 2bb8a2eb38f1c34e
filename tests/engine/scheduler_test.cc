// The scheduler's policy on hand-built sequences: budgets, mixed steps, FCFS admission, who gets
// preempted, and what happens to pages.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <memory>

namespace fission::engine {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void Make(std::int32_t num_pages, SchedulerConfig config, bool with_cache = false) {
    config_ = config;
    pool_ = std::make_unique<PagePool>(num_pages);
    if (with_cache) cache_ = std::make_unique<PrefixCache>(pool_.get(), config.page_size);
    scheduler_ = std::make_unique<Scheduler>(config, pool_.get(), cache_.get());
  }
  Sequence* Add(std::int32_t prompt_len, std::int32_t first_token = 0) {
    auto seq = std::make_unique<Sequence>();
    seq->arrival = seqs_.size();
    seq->params = params_;
    for (std::int32_t i = 0; i < prompt_len; ++i) seq->tokens.push_back(first_token + i);
    seq->prompt_len = prompt_len;
    seqs_.push_back(std::move(seq));
    scheduler_->Add(seqs_.back().get());
    return seqs_.back().get();
  }
  // Runs a plan as the engine would (every sampled sequence gets a token).
  StepPlan Step() {
    StepPlan plan = scheduler_->Schedule();
    scheduler_->Commit(plan);
    for (const ScheduledSequence& item : plan.items)
      if (item.sample) item.seq->tokens.push_back(7);
    return plan;
  }
  const ScheduledSequence* Find(const StepPlan& plan, const Sequence* seq) {
    for (const auto& item : plan.items)
      if (item.seq == seq) return &item;
    return nullptr;
  }

  SchedulerConfig config_;
  std::shared_ptr<SamplingParams> params_ = std::make_shared<SamplingParams>();
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<PrefixCache> cache_;
  std::unique_ptr<Scheduler> scheduler_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

TEST_F(SchedulerTest, ChunksPromptsAndMixesThemWithDecodes) {
  SchedulerConfig c;
  c.page_size = 4;
  c.chunked_prefill_size = 10;
  Make(100, c);
  Sequence* a = Add(6);
  StepPlan p1 = Step();
  ASSERT_EQ(p1.items.size(), 1u);
  EXPECT_EQ(p1.items[0].num_new_tokens, 6);
  EXPECT_TRUE(p1.items[0].sample);
  Sequence* b = Add(25);
  StepPlan p2 = Step();  // a decodes; b's first chunk of 10
  ASSERT_EQ(p2.items.size(), 2u);
  EXPECT_TRUE(Find(p2, a)->decode);
  EXPECT_EQ(Find(p2, b)->num_new_tokens, 10);
  EXPECT_FALSE(Find(p2, b)->sample);
  EXPECT_EQ(p2.num_decode_tokens, 1);
  EXPECT_EQ(p2.num_prefill_tokens, 10);
  StepPlan p3 = Step();
  EXPECT_EQ(Find(p3, b)->context_len, 10);
  EXPECT_EQ(Find(p3, b)->num_new_tokens, 10);
  StepPlan p4 = Step();
  EXPECT_EQ(Find(p4, b)->num_new_tokens, 5);
  EXPECT_TRUE(Find(p4, b)->sample);
  EXPECT_EQ(b->pages.size(), 7u);  // 25 tokens in pages of 4
}

TEST_F(SchedulerTest, AdmissionIsFirstComeFirstServed) {
  SchedulerConfig c;
  c.page_size = 4;
  c.chunked_prefill_size = -1;
  c.max_prefill_tokens = 20;
  Make(100, c);
  Sequence* big = Add(15);
  Sequence* huge = Add(30);  // over the budget: waits for a step of its own
  Sequence* small = Add(2);  // fits the budget left, but must not overtake `huge`
  StepPlan p1 = Step();
  EXPECT_NE(Find(p1, big), nullptr);
  EXPECT_EQ(Find(p1, huge), nullptr);
  EXPECT_EQ(Find(p1, small), nullptr);
  StepPlan p2 = Step();
  EXPECT_EQ(Find(p2, huge)->num_new_tokens, 30);  // whole, alone in prefill
  EXPECT_EQ(Find(p2, small), nullptr);
  StepPlan p3 = Step();
  EXPECT_NE(Find(p3, small), nullptr);
}

TEST_F(SchedulerTest, RunningLimitHoldsAdmission) {
  SchedulerConfig c;
  c.page_size = 4;
  c.max_running_requests = 2;
  Make(100, c);
  Add(3);
  Add(3);
  Sequence* third = Add(3);
  EXPECT_EQ(Step().items.size(), 2u);
  EXPECT_EQ(Step().items.size(), 2u);
  EXPECT_EQ(third->status, SequenceStatus::kWaiting);
  scheduler_->Finish(seqs_[0].get());
  StepPlan p = Step();
  EXPECT_NE(Find(p, third), nullptr);
}

TEST_F(SchedulerTest, TheYoungestIsPreemptedAndComesBackInOrder) {
  SchedulerConfig c;
  c.page_size = 2;
  Make(6, c);  // 12 slots
  Sequence* a = Add(3);
  Sequence* b = Add(3);
  StepPlan p1 = Step();  // both admitted: 2 pages each, 2 free
  ASSERT_EQ(p1.items.size(), 2u);
  // Decode until the 6 pages run out: then b, the younger, makes room for a.
  for (int step = 0; step < 6; ++step) {
    StepPlan p = Step();
    EXPECT_NE(Find(p, a), nullptr) << "the oldest always runs, step " << step;
  }
  EXPECT_EQ(a->num_preemptions, 0);
  EXPECT_GT(b->num_preemptions, 0);
  // A preempted sequence keeps its tokens (prompt and generated) and recomputes them.
  EXPECT_GT(b->num_tokens(), 3);
  // Every page is free or held by a or b.
  std::int32_t held = static_cast<std::int32_t>(a->pages.size() + b->pages.size());
  EXPECT_EQ(held + pool_->num_free(), 6);
}

TEST_F(SchedulerTest, ASequenceAloneThatCannotGrowFails) {
  SchedulerConfig c;
  c.page_size = 2;
  Make(2, c);  // 4 slots
  Sequence* a = Add(3);
  Step();  // 3 computed, 1 generated
  Step();  // computes the 4th token
  StepPlan p = scheduler_->Schedule();  // the 5th needs a third page
  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_EQ(p.failed[0], a);
  scheduler_->Finish(a);
  EXPECT_EQ(pool_->num_free(), 2);
}

TEST_F(SchedulerTest, PrefixHitsSkipCachedPagesAndFinishedPagesStayCached) {
  SchedulerConfig c;
  c.page_size = 4;
  Make(20, c, /*with_cache=*/true);
  Sequence* a = Add(10, 100);
  Step();
  scheduler_->Finish(a);  // 10 computed: pages 0-1 full and cached
  EXPECT_EQ(cache_->num_pages(), 2);
  EXPECT_EQ(pool_->num_free(), 18);
  Sequence* b = Add(12, 100);  // shares the first 10 tokens
  StepPlan p = Step();
  EXPECT_EQ(Find(p, b)->context_len, 8);
  EXPECT_EQ(Find(p, b)->num_new_tokens, 4);
  EXPECT_EQ(scheduler_->counters().prefix_hit_tokens, 8);
  EXPECT_EQ(b->pages[0], cache_->MatchPrefix(b->tokens.data(), 4).pages.at(0));
  EXPECT_EQ(pool_->ref_count(b->pages[0]), 2);  // the tree and b
}

TEST_F(SchedulerTest, AWaitingSequenceLongerThanThePoolFailsEvenWithCachedPages) {
  SchedulerConfig c;
  c.page_size = 4;
  Make(8, c, /*with_cache=*/true);  // 32 slots
  Sequence* a = Add(10, 100);
  Step();
  scheduler_->Finish(a);  // two full pages stay in the prefix cache
  ASSERT_EQ(cache_->num_pages(), 2);
  Sequence* b = Add(33, 100);  // e.g. a recompute after preemption: shares a's prefix, longer than the pool
  StepPlan p = scheduler_->Schedule();
  ASSERT_EQ(p.failed.size(), 1u);
  EXPECT_EQ(p.failed[0], b);
  EXPECT_TRUE(b->pages.empty());
  scheduler_->Finish(b);
  EXPECT_EQ(pool_->num_free() + cache_->num_pages(), 8);
}

}  // namespace
}  // namespace fission::engine
