#include "engine/scheduler.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace fission::engine {

Scheduler::Scheduler(const SchedulerConfig& config, PagePool* pool, PrefixCache* cache, StatePool* states)
    : config_(config), pool_(pool), cache_(cache), states_(states) {
  FISSION_CHECK(config.page_size >= 1 && config.max_running_requests >= 1 && config.max_prefill_tokens >= 1);
}

void Scheduler::Add(Sequence* seq) {
  FISSION_CHECK(seq->status == SequenceStatus::kWaiting && seq->pages.empty());
  waiting_.emplace(seq->arrival, seq);
}

std::int32_t Scheduler::AvailablePages() const {
  return pool_->num_free() + (cache_ != nullptr ? cache_->CountEvictable() : 0);
}

bool Scheduler::Reserve(Sequence* seq, std::int32_t tokens) {
  const std::int32_t need = PagesFor(tokens) - static_cast<std::int32_t>(seq->pages.size());
  if (need <= 0) return true;
  if (pool_->num_free() < need && cache_ != nullptr)
    counters_.evicted_pages += cache_->Evict(need - pool_->num_free());
  return pool_->Allocate(need, &seq->pages);
}

void Scheduler::ReleasePages(Sequence* seq) {
  if (cache_ != nullptr) {
    // Keep the computed full pages for later requests (and for this one, if it comes back).
    const std::int32_t full = std::min(FullComputedPages(seq), static_cast<std::int32_t>(seq->pages.size()));
    if (full > seq->num_tree_pages) {
      auto* parent = seq->tree_node != nullptr ? static_cast<PrefixCache::Node*>(seq->tree_node) : cache_->root();
      cache_->Insert(parent, seq->tokens.data(), seq->pages, seq->num_tree_pages, full);
    }
  }
  for (std::int32_t page : seq->pages) pool_->Unref(page);
  seq->pages.clear();
  if (seq->state_slot >= 0) {
    states_->Free(seq->state_slot);
    seq->state_slot = -1;
  }
  seq->tree_node = nullptr;
  seq->num_tree_pages = 0;
  seq->num_computed = 0;
  seq->drafts.clear();  // they extend KV that is gone
}

void Scheduler::TrimPages(Sequence* seq, std::int32_t tokens) {
  const std::size_t keep = static_cast<std::size_t>(std::max(PagesFor(tokens), seq->num_tree_pages));
  while (seq->pages.size() > keep) {
    pool_->Unref(seq->pages.back());
    seq->pages.pop_back();
  }
}

void Scheduler::Preempt(Sequence* seq) {
  FISSION_CHECK(seq->status == SequenceStatus::kRunning);
  ReleasePages(seq);
  seq->status = SequenceStatus::kWaiting;
  ++seq->num_preemptions;
  ++counters_.preemptions;
  waiting_.emplace(seq->arrival, seq);
}

void Scheduler::Plan(Sequence* seq, std::int32_t num_new, StepPlan* plan) {
  ScheduledSequence item;
  item.seq = seq;
  item.context_len = seq->num_computed;
  item.num_new_tokens = num_new;
  item.num_drafts = std::max(0, seq->num_computed + num_new - seq->num_tokens());
  item.sample = seq->num_computed + num_new - item.num_drafts == seq->num_tokens();
  item.decode = num_new == 1 + item.num_drafts && item.sample && seq->num_computed >= seq->prompt_len;
  if (seq->params->prompt_logprobs) {
    // Prompt position p gives the logprob of token p + 1; skip those already collected.
    const std::int32_t done = static_cast<std::int32_t>(seq->prompt_logprobs.size());
    item.prompt_logprob_begin = std::max(item.context_len, done);
    item.prompt_logprob_end = std::min(item.context_len + num_new, seq->prompt_len - 1);
    if (item.prompt_logprob_end < item.prompt_logprob_begin) item.prompt_logprob_end = item.prompt_logprob_begin;
  }
  if (item.decode) {
    plan->num_decode_tokens += num_new;
  } else {
    plan->num_prefill_tokens += num_new;
  }
  plan->items.push_back(item);
}

bool Scheduler::Admit(Sequence* seq, std::int32_t* budget, bool chunking, StepPlan* plan) {
  FISSION_CHECK(seq->pages.empty() && seq->num_computed == 0 && seq->state_slot < 0);
  if (states_ != nullptr && states_->num_free() == 0) return false;  // every state slot is running
  // Reuse cached whole pages, leaving at least one token to compute (its logits are needed).
  // Prompt logprobs need the logits of every prompt position, so such sequences reuse nothing
  // until those are collected.
  const bool need_prompt_logits =
      seq->params->prompt_logprobs && static_cast<std::int32_t>(seq->prompt_logprobs.size()) < seq->prompt_len - 1;
  std::int32_t hit_tokens = 0;
  PrefixCache::Node* hit_node = nullptr;
  if (cache_ != nullptr && !need_prompt_logits) {
    PrefixCache::Match match = cache_->MatchPrefix(seq->tokens.data(), seq->num_tokens() - 1);
    for (std::int32_t page : match.pages) pool_->Ref(page);
    seq->pages = std::move(match.pages);
    hit_tokens = static_cast<std::int32_t>(seq->pages.size()) * config_.page_size;
    hit_node = match.last;
  }
  const std::int32_t remaining = seq->num_tokens() - hit_tokens;
  std::int32_t want = remaining;
  if (chunking) {
    want = std::min(remaining, *budget);
  } else if (remaining > *budget && plan->num_prefill_tokens > 0) {
    want = 0;  // a whole prompt over the budget runs in a step of its own
  }
  seq->num_computed = hit_tokens;
  // Admit only if the whole prompt (not just this chunk) and its first generated token fit, with
  // a page of growth kept for every running sequence, so that admitting does not force the next
  // steps to preempt what was just admitted. With nothing running, admit regardless.
  const std::int32_t need = PagesFor(seq->num_tokens() + 1) - static_cast<std::int32_t>(seq->pages.size());
  const std::int32_t reserve = static_cast<std::int32_t>(running_.size());
  const bool room = reserve == 0 || pool_->num_free() >= need + reserve || AvailablePages() >= need + reserve;
  if (want <= 0 || !room || !Reserve(seq, hit_tokens + want)) {
    for (std::int32_t page : seq->pages) pool_->Unref(page);
    seq->pages.clear();
    seq->num_computed = 0;
    return false;
  }
  if (states_ != nullptr) seq->state_slot = states_->Reserve();
  seq->tree_node = hit_node;
  seq->num_tree_pages = hit_tokens / config_.page_size;
  if (seq->cached_tokens < 0) seq->cached_tokens = hit_tokens;
  counters_.prefix_hit_tokens += hit_tokens;
  seq->status = SequenceStatus::kRunning;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq,
                                   [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; }),
                  seq);
  *budget = std::max(0, *budget - want);
  Plan(seq, want, plan);
  return true;
}

StepPlan Scheduler::Schedule() {
  StepPlan plan;
  const bool chunking = config_.chunked_prefill_size > 0;
  std::int32_t budget =
      chunking ? std::min(config_.chunked_prefill_size, config_.max_prefill_tokens) : config_.max_prefill_tokens;

  // 1. Running sequences, oldest first. Victims of preemption are taken from the back (youngest),
  //    which has not been planned yet.
  std::size_t end = running_.size();  // running_[end..] were preempted in this step
  for (std::size_t i = 0; i < end; ++i) {
    Sequence* seq = running_[i];
    const std::int32_t remaining = seq->num_tokens() - seq->num_computed;
    FISSION_CHECK(remaining >= 1, "a running sequence with nothing to compute");
    const bool decode = remaining == 1 && seq->num_computed >= seq->prompt_len;
    // A decode with drafts verifies them in the same run; without the pages for them it decodes
    // plainly (its drafts are dropped, never a reason to preempt).
    if (decode && !seq->drafts.empty() &&
        !Reserve(seq, seq->num_tokens() + static_cast<std::int32_t>(seq->drafts.size())))
      seq->drafts.clear();
    std::int32_t want = decode ? 1 + static_cast<std::int32_t>(seq->drafts.size())
                               : (chunking ? std::min(remaining, budget) : remaining);
    if (want == 0) continue;  // no prefill budget left in this step; keeps its pages
    bool planned = false, wait = false;
    while (true) {
      if (Reserve(seq, seq->num_computed + want)) {
        planned = true;
        break;
      }
      if (!decode) {
        // A prompt chunk first shrinks to the pages left; with none left, only the oldest
        // sequence preempts for its prompt: a younger one waits, keeping its pages.
        const std::int32_t fit =
            (static_cast<std::int32_t>(seq->pages.size()) + AvailablePages()) * config_.page_size - seq->num_computed;
        if (fit > 0 && fit < want) {
          want = fit;
          continue;
        }
        if (i > 0) {
          wait = true;
          break;
        }
      }
      if (end > i + 1) {  // preempt the youngest running sequence
        Preempt(running_[--end]);
        ++plan.num_preempted;
        continue;
      }
      break;
    }
    if (wait) continue;
    if (planned) {
      if (!decode) budget = std::max(0, budget - want);
      Plan(seq, want, &plan);
      continue;
    }
    // No younger sequence is left to preempt. If others hold pages, step aside for them;
    // alone, the sequence can never fit.
    bool alone = i == 0;
    for (std::size_t j = 0; j < i && alone; ++j) alone = running_[j]->pages.empty();
    if (alone) {
      plan.failed.push_back(seq);
    } else {
      // Move it behind the planned ones; it is the youngest left.
      Preempt(seq);
      ++plan.num_preempted;
      running_[i] = nullptr;
    }
  }
  // Drop preempted and failed sequences from the running list, keeping arrival order.
  running_.resize(end);
  std::erase(running_, nullptr);
  for (Sequence* seq : plan.failed) std::erase(running_, seq);

  // 2. Waiting sequences, oldest first, unless memory was short in this step.
  if (plan.num_preempted == 0 && plan.failed.empty()) {
    while (!waiting_.empty() && static_cast<std::int32_t>(running_.size()) < config_.max_running_requests &&
           budget > 0) {
      Sequence* seq = waiting_.begin()->second;
      if (!Admit(seq, &budget, chunking, &plan)) {
        if (running_.empty() && plan.items.empty()) {
          // Nothing else holds pages (the prefix cache gave up what it could) and it still does
          // not fit: a recompute longer than the pool.
          waiting_.erase(waiting_.begin());
          plan.failed.push_back(seq);
          continue;
        }
        break;
      }
      waiting_.erase(waiting_.begin());
    }
  }
  return plan;
}

void Scheduler::Commit(const StepPlan& plan) {
  for (const ScheduledSequence& item : plan.items) {
    Sequence* seq = item.seq;
    FISSION_CHECK_EQ(seq->num_computed, item.context_len);
    FISSION_CHECK(item.num_rejected >= 0 && item.num_rejected <= item.num_drafts);
    seq->num_computed += item.num_new_tokens - item.num_rejected;
    if (item.decode) {
      counters_.decode_tokens += item.num_new_tokens - item.num_rejected;
    } else {
      counters_.computed_prompt_tokens += item.num_new_tokens;
    }
    // A verify run's drafts are spent; the rejected rows' slots go back with their pages (the
    // next token's slot stays).
    if (item.num_drafts > 0) {
      seq->drafts.clear();
      TrimPages(seq, seq->num_computed + 1);
    }
    if (cache_ == nullptr) continue;
    const std::int32_t full = FullComputedPages(seq);
    if (full > seq->num_tree_pages) {
      auto* parent = seq->tree_node != nullptr ? static_cast<PrefixCache::Node*>(seq->tree_node) : cache_->root();
      seq->tree_node = cache_->Insert(parent, seq->tokens.data(), seq->pages, seq->num_tree_pages, full);
      seq->num_tree_pages = full;
    }
  }
}

void Scheduler::Finish(Sequence* seq) {
  if (seq->status == SequenceStatus::kWaiting) {
    waiting_.erase(seq->arrival);
  } else if (seq->status == SequenceStatus::kRunning) {
    std::erase(running_, seq);
  }
  ReleasePages(seq);
  seq->status = SequenceStatus::kFinished;
}

}  // namespace fission::engine
