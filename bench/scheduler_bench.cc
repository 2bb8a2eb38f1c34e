// Scheduler overhead per step with 512 running requests (not a test; it never fails).
// `scheduler_bench [page_size] [dp]`: with dp > 1 the null model reports dp data-parallel
// attention groups, so the engine keeps one scheduler, pool and prefix cache per group and the
// requests are spread over them round-robin (the new scheduling's CPU cost against dp 1).
//
// The model costs nothing: it writes no rows and returns zero logits over a small vocabulary, so
// a step's time is the engine's own work. Two measurements:
//   step:     Engine::Step (schedule, batch building, the null model, sampling, prefix-cache
//             insertion, reports)
//   schedule: Scheduler::Schedule + Commit alone, on the same 512 decoding sequences
// Build (from the repository root, after building fission_engine):
//   g++ -std=c++20 -O2 -Isrc bench/scheduler_bench.cc build/libfission_engine.a
//       build/libfission_model.a build/libfission_tensor.a build/libfission_base.a -o build/scheduler_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"

namespace {

using namespace fission;
using Clock = std::chrono::steady_clock;

class NullModel : public model::CausalLM {
 public:
  explicit NullModel(int dp) : dp_(dp) {}
  int dp_size() const override { return dp_; }
  std::vector<model::StepLogits> ForwardGroups(const std::vector<model::ForwardBatch>& batches) override {
    std::vector<model::StepLogits> out;
    for (const model::ForwardBatch& b : batches) out.push_back(b.token_ids.empty() ? model::StepLogits() : Forward(b));
    return out;
  }
  std::string architecture() const override { return "NullModel"; }
  std::int64_t vocab_size() const override { return 32; }
  std::int64_t max_position_embeddings() const override { return 1 << 20; }
  model::MemorySpec Memory() const override {
    model::CacheClass rows;
    rows.name = "rows";
    rows.fields = {{"row", DType::kF32, 1}};
    return {{rows}};
  }
  void AllocateMemory(const model::MemoryPlan&) override {}  // it writes nothing
  model::StepLogits Forward(const model::ForwardBatch& batch) override {
    Buffer logits(DType::kF32, Shape{static_cast<std::int64_t>(batch.logits_indices.size()), vocab_size()});
    std::memset(logits.tensor().data, 0, logits.tensor().bytes());
    return model::StepLogits(std::move(logits));
  }

 private:
  int dp_;
};

struct Summary {
  double mean_us, p50_us, p99_us;
};

Summary Summarize(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  double sum = 0;
  for (double u : us) sum += u;
  return {sum / static_cast<double>(us.size()), us[us.size() / 2], us[us.size() * 99 / 100]};
}

}  // namespace

int main(int argc, char** argv) {
  const int kRequests = 512, kPromptLen = 128, kWarmup = 200, kSteps = 2000;
  int page_size = 16;
  if (argc > 1) page_size = std::stoi(argv[1]);
  const int dp = argc > 2 ? std::stoi(argv[2]) : 1;

  // 1. Engine::Step with the null model.
  NullModel model(dp);
  engine::EngineConfig config;
  config.page_size = page_size;
  config.max_running_requests = kRequests;
  config.max_total_tokens = static_cast<std::int64_t>(kRequests) * (kPromptLen + kWarmup + kSteps + 64);
  engine::Engine engine(&model, config);
  for (int i = 0; i < kRequests; ++i) {
    engine::Request r;
    for (int t = 0; t < kPromptLen; ++t) r.prompt_ids.push_back((i * 7 + t * 13) % 32);
    r.params.temperature = 0.0;
    r.params.ignore_eos = true;
    r.params.max_new_tokens = 1 << 20;
    r.callback = [](const engine::RequestOutput&) {};
    engine.Submit(std::move(r));
  }
  for (int s = 0; s < kWarmup; ++s) engine.Step();
  if (engine.stats().running != kRequests) {
    std::fprintf(stderr, "expected %d running requests, got %d\n", kRequests, engine.stats().running);
    return 1;
  }
  std::vector<double> step_us;
  for (int s = 0; s < kSteps; ++s) {
    const auto t0 = Clock::now();
    engine.Step();
    step_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  const Summary step = Summarize(step_us);

  // 2. Scheduler::Schedule + Commit alone.
  engine::PagePool pool(static_cast<std::int32_t>(config.max_total_tokens / page_size));
  engine::PrefixCache cache(&pool, page_size);
  engine::SchedulerConfig sc;
  sc.page_size = page_size;
  sc.max_running_requests = kRequests;
  engine::Scheduler scheduler(sc, &pool, &cache);
  auto params = std::make_shared<engine::SamplingParams>();
  std::vector<engine::Sequence> seqs(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    seqs[i].arrival = i;
    seqs[i].params = params;
    for (int t = 0; t < kPromptLen; ++t) seqs[i].tokens.push_back((i * 7 + t * 13) % 32);
    seqs[i].prompt_len = kPromptLen;
    scheduler.Add(&seqs[i]);
  }
  std::vector<double> schedule_us;
  for (int s = 0; s < kWarmup + kSteps; ++s) {
    const auto t0 = Clock::now();
    engine::StepPlan plan = scheduler.Schedule();
    scheduler.Commit(plan);
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (s >= kWarmup) schedule_us.push_back(us);
    for (const auto& item : plan.items)
      if (item.sample) item.seq->tokens.push_back(s % 32);  // the "sampled" token
  }
  const Summary schedule = Summarize(schedule_us);

  std::printf("scheduler_bench: %d running requests, prompt %d, page size %d, %d steps, %d DP group(s)\n", kRequests,
              kPromptLen, page_size, kSteps, dp);
  std::printf("  engine step (null model):  mean %.1f us  p50 %.1f us  p99 %.1f us\n", step.mean_us, step.p50_us,
              step.p99_us);
  std::printf("  schedule + commit only:    mean %.1f us  p50 %.1f us  p99 %.1f us\n", schedule.mean_us,
              schedule.p50_us, schedule.p99_us);
  return 0;
}
