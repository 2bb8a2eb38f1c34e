// The engine: sizes the model's memory (the model owns its storage; the engine hands out its page
// ids and state-slot ids), owns the page pool, the state pool, the prefix cache, the scheduler, the
// model runner and the sampler, and runs steps.
//
// Threads: Submit, Abort, HasWork and stats may be called from any thread. Step (or the loop
// Start runs) runs on one engine thread; output callbacks are invoked there, after each step, with
// the tokens (and text) each sequence produced in it. Nothing throws out of Step: a failing model
// call finishes the step's requests with FinishReason::kAbort and an error message.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/data_parallel.h"
#include "engine/detokenizer.h"
#include "engine/drafter.h"
#include "engine/engine_config.h"
#include "engine/model_runner.h"
#include "engine/output_processor.h"
#include "engine/page_pool.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/state_pool.h"
#include "engine/verifier.h"
#include "model/causal_lm.h"

namespace fission::engine {

struct EngineStats {
  std::int64_t steps = 0;
  std::int64_t computed_prompt_tokens = 0;  // prompt (and recomputed) tokens run through the model
  std::int64_t prefix_hit_tokens = 0;       // tokens served by the prefix cache
  std::int64_t generated_tokens = 0;        // tokens sampled
  std::int64_t decode_only_tokens = 0;      // tokens sampled in steps without prefill work
  std::int64_t preemptions = 0;
  std::int64_t evicted_pages = 0;
  double prefill_seconds = 0.0;  // time of steps with prefill work
  double decode_seconds = 0.0;   // time of steps with decode work only
  std::int32_t running = 0;
  std::int32_t waiting = 0;
  std::int32_t free_pages = 0;
  std::int32_t cached_pages = 0;
  std::int32_t free_state_slots = 0;  // a model with per-request memory
  // Data-parallel attention: running and waiting sequences of each DP group (one entry without).
  std::vector<std::int32_t> dp_running, dp_waiting;
  // The (token, routed expert) pairs each EP rank's experts computed (CausalLM::ExpertLoad).
  std::vector<std::int64_t> expert_load;
  double mask_seconds = 0.0;  // computing constrained sequences' token masks (structured outputs)
  std::int64_t masks = 0;     // masks computed
  // Speculative decoding: verify runs, the drafts they checked and accepted, and draft steps.
  std::int64_t spec_verify_runs = 0;
  std::int64_t spec_draft_tokens = 0;
  std::int64_t spec_accepted_tokens = 0;
  std::int64_t spec_draft_steps = 0;
  // Tokens a verify run emits on average (accepted drafts plus the target's own), as SGLang's
  // avg_spec_accept_length; 0 before any verify run.
  double spec_accept_length() const {
    return spec_verify_runs == 0 ? 0.0
                                 : static_cast<double>(spec_accepted_tokens + spec_verify_runs) / spec_verify_runs;
  }
  // The share of checked drafts that were accepted.
  double spec_accept_rate() const {
    return spec_draft_tokens == 0 ? 0.0 : static_cast<double>(spec_accepted_tokens) / spec_draft_tokens;
  }
};

class Engine {
 public:
  // `model` and `detokenizer` (may be null) must outlive the engine.
  Engine(model::CausalLM* model, const EngineConfig& config, const Detokenizer* detokenizer = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Throws fission::Error naming the bad field when a request cannot be run: an empty or
  // out-of-vocabulary prompt, one that reaches the context length, bad sampling parameters, or a
  // prompt plus max_new_tokens that the whole KV cache could not hold. Any thread.
  void Validate(const std::vector<std::int32_t>& prompt_ids, const SamplingParams& params) const;
  // Validates and queues a request; returns its id.
  std::int64_t Submit(Request request);
  // Aborts a request; its sequences finish with kAbort and their pages are freed at the end of
  // the current (or next) step. Unknown or finished ids are ignored.
  void Abort(std::int64_t request_id);
  // Runs one step: admits submitted requests, schedules, runs the model, samples, reports.
  // Returns false when there was nothing to do.
  bool Step();
  // Steps until no request is left.
  void RunUntilIdle();
  bool HasWork() const;
  // Frees every prefix-cache page no running sequence uses, at the start of the next step
  // (SGLang's /flush_cache). Any thread.
  void RequestFlushCache();

  // A background engine thread that steps while there is work and sleeps otherwise.
  void Start();
  void Stop();

  EngineStats stats() const;
  // Pages of one DP group's pool (every group has as many).
  std::int32_t num_pages() const { return groups_[0].pool->num_pages(); }
  // DP attention groups (1 without --enable-dp-attention), each with its own pools and scheduler.
  int dp_size() const { return static_cast<int>(groups_.size()); }
  // Tokens one group's KV cache holds: one sequence can never grow beyond this.
  std::int64_t kv_capacity_tokens() const { return static_cast<std::int64_t>(memory_plan_.num_pages) * config_.page_size; }
  // State slots of a model with per-request memory (0 otherwise).
  std::int32_t num_state_slots() const { return groups_[0].states ? groups_[0].states->num_slots() : 0; }
  const model::MemoryPlan& memory_plan() const { return memory_plan_; }
  std::int32_t page_size() const { return config_.page_size; }
  std::int64_t vocab_size() const { return vocab_size_; }
  std::int32_t context_length() const { return context_length_; }
  // Whether speculative decoding is on (--speculative-algorithm).
  bool speculative() const { return drafter_ != nullptr; }
  // Checks that every page is free or held exactly by the sequences and the prefix cache that
  // claim it, and every state slot by exactly the running sequence that claims it; returns "" or
  // a description of the first discrepancy. Engine thread only.
  std::string CheckPageAccounting() const;
  // The last step's batch of DP group `group` (tests).
  const model::ForwardBatch& last_batch(int group = 0) const { return runner_->last_batch(group); }

 private:
  struct RequestState {
    std::vector<std::unique_ptr<Sequence>> sequences;
    OutputCallback callback;
    std::int32_t unfinished = 0;
    // Completions 1..n-1 wait here until completion 0 has computed the prompt, so that they
    // reuse its pages through the prefix cache instead of computing the prompt again.
    std::vector<Sequence*> held;
  };
  struct Submitted {
    std::int64_t id;
    Request request;
  };

  void DrainIncoming();
  // Plans every group's step (finishing what cannot fit); the plans, one per group.
  std::vector<StepPlan> ScheduleGroups();
  // Runs the model on the plans and samples; false when the model failed (the plans' sequences
  // are finished with the error).
  bool RunGroups(std::vector<StepPlan>* plans);
  Scheduler& scheduler_of(const Sequence* seq) { return *groups_[seq->dp_group].scheduler; }
  // Every kStepLogInterval steps with DP attention or expert parallelism: each group's queue and
  // the expert load per EP rank since the previous line.
  static constexpr int kStepLogInterval = 40;
  void LogParallelStep();
  std::string CheckGroupAccounting(int group) const;
  // Applies the sampler's results: prompt logprobs, new tokens, finishing.
  void ProcessStep(const StepPlan& plan, const std::vector<ItemSamples>& where,
                   const std::vector<kernels::SampledToken>& results, const std::vector<VerifiedRun>& verified);
  // Speculative decoding: the verify runs' outcome (rejected rows for Commit, counters).
  void ApplyVerified(StepPlan* plan, const std::vector<VerifiedRun>& verified);
  // Runs the draft steps after a committed step; a failure finishes the step's running sequences.
  void RunDraftSteps(const StepPlan& plan);
  // Every kSpeculativeLogInterval decode steps: the acceptance since the previous line.
  static constexpr int kSpeculativeLogInterval = 40;
  void LogSpeculativeDecode();
  void FinishSequence(Sequence* seq, FinishReason reason, const std::string& error);
  // Appends a sampled token (advancing the sequence's constraint, finishing it when the
  // constraint is done or refuses the token); whether the token was kept.
  bool AppendSampled(Sequence* seq, const kernels::SampledToken& r);
  // Tells a constrained sequence's matcher the token sampled; false when it does not continue the
  // output (only when the constraint allowed no token at all).
  bool AdvanceMatcher(Sequence* seq, std::int32_t token);
  // Queues the completions held back behind `seq` (completion 0 of its request).
  void ReleaseHeld(const Sequence* seq);
  void Report();

  EngineConfig config_;
  model::CausalLM* model_;
  std::int64_t vocab_size_;
  std::int32_t context_length_;
  model::MemoryPlan memory_plan_;
  std::vector<DpGroup> groups_;  // one per DP attention group
  LoadBalancer balancer_;
  std::unique_ptr<ModelRunner> runner_;
  Sampler sampler_;
  OutputProcessor outputs_;
  SpeculativeVerifier verifier_;
  std::unique_ptr<Drafter> drafter_;  // speculative decoding on
  int decode_steps_since_log_ = 0;
  EngineStats logged_;  // the counters at the previous speculative log line
  int steps_since_parallel_log_ = 0;
  std::vector<std::int64_t> logged_load_;  // the expert load at the previous parallel log line

  // Engine-thread state.
  std::unordered_map<std::int64_t, RequestState> requests_;
  std::vector<Sequence*> touched_;  // sequences with something to report after this step
  std::uint64_t next_arrival_ = 0;
  EngineStats local_stats_;

  // Shared with submitting threads.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Submitted> incoming_;
  std::vector<std::int64_t> aborts_;
  bool flush_requested_ = false;
  std::int64_t next_request_id_ = 1;
  std::int64_t live_requests_ = 0;  // submitted and not yet finished
  EngineStats published_stats_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace fission::engine
