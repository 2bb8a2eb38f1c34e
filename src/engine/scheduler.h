// The scheduler: which sequences run in the next step, with how many tokens each, and which pages
// hold them. The policy is written down in docs/engine.md; in short:
//   1. Running sequences, oldest first: a decoding sequence gets its one token; a sequence part-way
//      through its prompt gets the next chunk the step's prefill budget allows. A sequence that
//      needs a page and finds none evicts unused prefix-cache pages, then preempts the youngest
//      running sequences (their KV is dropped and recomputed later); if none is younger it
//      preempts itself (or, holding the whole pool alone, fails: it cannot fit).
//   2. Waiting sequences, oldest first, are admitted while the running limit, the prefill budget,
//      the free pages and (for a model with per-request memory) the free state slots allow; the
//      first that does not fit stops admission (no overtaking). A running sequence holds one state
//      slot, freed when it finishes or is preempted (its state is recomputed with its KV).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "engine/page_pool.h"
#include "engine/prefix_cache.h"
#include "engine/request.h"
#include "engine/state_pool.h"

namespace fission::engine {

struct SchedulerConfig {
  std::int32_t page_size = 16;
  std::int32_t max_running_requests = 256;
  // Prompt tokens computed per step (with max_prefill_tokens, the smaller bounds the step); a
  // prompt longer than what is left runs in chunks. <= 0 disables chunking (whole prompts only).
  std::int32_t chunked_prefill_size = 8192;
  // Prompt tokens all sequences compute per step (a whole prompt above it still runs, alone, when
  // chunking is off).
  std::int32_t max_prefill_tokens = 16384;
};

// One sequence's share of a step.
struct ScheduledSequence {
  Sequence* seq = nullptr;
  std::int32_t context_len = 0;     // tokens already in the cache
  std::int32_t num_new_tokens = 0;  // tokens computed in this step: positions [context_len, +num_new_tokens)
  bool sample = false;              // the step reaches the last token: sample the next one
  bool decode = false;              // a generated token (not prompt or recompute work), with its drafts
  // Speculative decoding: a verify run of the sequence's last token and this many draft tokens
  // (num_new_tokens = 1 + num_drafts, every row's logits come back). After sampling the engine
  // sets num_rejected, the rows Commit does not keep.
  std::int32_t num_drafts = 0;
  std::int32_t num_rejected = 0;
  // Positions whose logits give prompt logprobs (the logprob of the token after each).
  std::int32_t prompt_logprob_begin = 0;
  std::int32_t prompt_logprob_end = 0;
};

struct StepPlan {
  std::vector<ScheduledSequence> items;
  std::vector<Sequence*> failed;  // sequences that cannot fit in the pool even alone
  std::int32_t num_prefill_tokens = 0;
  std::int32_t num_decode_tokens = 0;
  std::int32_t num_preempted = 0;
  bool empty() const { return items.empty(); }
};

struct SchedulerCounters {
  std::int64_t prefix_hit_tokens = 0;       // tokens reused from the prefix cache at admission
  std::int64_t computed_prompt_tokens = 0;  // prefill tokens run through the model (incl. recompute)
  std::int64_t decode_tokens = 0;
  std::int64_t preemptions = 0;
  std::int64_t evicted_pages = 0;
};

class Scheduler {
 public:
  // `cache` may be null (--disable-radix-cache), and `states` too (a model without per-request
  // memory).
  Scheduler(const SchedulerConfig& config, PagePool* pool, PrefixCache* cache, StatePool* states = nullptr);

  // Queues a new sequence (status kWaiting, no pages).
  void Add(Sequence* seq);
  // Plans the next step and gives its sequences the pages for their new tokens.
  StepPlan Schedule();
  // After the step ran: the planned tokens (less a verify run's rejected rows) are in the cache;
  // full pages join the prefix cache; pages that hold only rejected rows go back to the pool.
  void Commit(const StepPlan& plan);
  // Gives a running sequence pages for its first `tokens` positions (a draft step writes beyond
  // its tokens), evicting unused prefix-cache pages if needed; false when the pool has too few.
  bool ReserveFor(Sequence* seq, std::int32_t tokens) { return Reserve(seq, tokens); }
  // Removes a sequence wherever it is and lets go of its pages (full computed pages stay cached).
  void Finish(Sequence* seq);

  const std::vector<Sequence*>& running() const { return running_; }
  std::size_t num_waiting() const { return waiting_.size(); }
  const SchedulerCounters& counters() const { return counters_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  std::int32_t PagesFor(std::int32_t tokens) const { return (tokens + config_.page_size - 1) / config_.page_size; }
  // Gives `seq` pages for its first `tokens` positions, evicting cached pages if needed.
  bool Reserve(Sequence* seq, std::int32_t tokens);
  // Free pages plus pages the prefix cache could give up.
  std::int32_t AvailablePages() const;
  // Lets go of the sequence's pages (keeping full computed ones in the prefix cache) and state slot.
  void ReleasePages(Sequence* seq);
  // Lets go of the pages past the first `tokens` positions.
  void TrimPages(Sequence* seq, std::int32_t tokens);
  // Pages whose positions are computed and have their tokens (a verify run computes drafts that
  // join the tokens only after Commit): what the prefix cache may hold.
  std::int32_t FullComputedPages(const Sequence* seq) const {
    return std::min(seq->num_computed, seq->num_tokens()) / config_.page_size;
  }
  void Preempt(Sequence* seq);
  // Moves the head of the waiting queue into the plan if it fits; false stops admission.
  bool Admit(Sequence* seq, std::int32_t* budget, bool chunking, StepPlan* plan);
  void Plan(Sequence* seq, std::int32_t num_new, StepPlan* plan);

  SchedulerConfig config_;
  PagePool* pool_;
  PrefixCache* cache_;
  StatePool* states_;
  std::map<std::uint64_t, Sequence*> waiting_;  // by arrival
  std::vector<Sequence*> running_;              // by arrival
  SchedulerCounters counters_;
};

}  // namespace fission::engine
