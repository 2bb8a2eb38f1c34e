#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "base/error.h"
#include "base/log.h"
#include "engine/memory_planner.h"

namespace fission::engine {

namespace {

model::MemoryPlan PlanModelMemory(const EngineConfig& config, model::CausalLM& model) {
  const model::MemorySpec spec = model.Memory();
  const std::optional<kernels::DeviceMemory> device = model.device_memory();
  const model::MemoryPlan plan = PlanMemory(spec, config, device);
  if (device)
    Log(LogLevel::kInfo, "model memory: ", DescribeMemoryPlan(spec, plan), "; after the weights ",
        device->free_bytes / kBytesPerGiB, " of ", device->total_bytes / kBytesPerGiB, " GiB were free, --mem-fraction-static ",
        config.mem_fraction_static > 0 ? config.mem_fraction_static : kDefaultMemFractionStatic);
  else if (plan.num_state_slots > 0)
    Log(LogLevel::kInfo, "model memory: ", DescribeMemoryPlan(spec, plan));
  return plan;
}

// One DP group's scheduler: --max-running-requests is shared out over the groups, as SGLang does.
SchedulerConfig MakeSchedulerConfig(const EngineConfig& config, int dp_size) {
  SchedulerConfig s;
  s.page_size = config.page_size;
  s.max_running_requests = std::max(1, config.max_running_requests / dp_size);
  s.chunked_prefill_size = config.chunked_prefill_size;
  s.max_prefill_tokens = config.max_prefill_tokens;
  return s;
}

std::int32_t ContextLength(const EngineConfig& config, const model::CausalLM& model) {
  if (config.context_length > 0) return config.context_length;
  return static_cast<std::int32_t>(std::min<std::int64_t>(model.max_position_embeddings(), 1 << 30));
}

}  // namespace

Engine::Engine(model::CausalLM* model, const EngineConfig& config, const Detokenizer* detokenizer)
    : config_((config.Validate(), config)),
      model_(model),
      vocab_size_(model->vocab_size()),
      context_length_(ContextLength(config, *model)),
      balancer_(config.load_balance_method),
      sampler_(config.eos_token_ids),
      outputs_(detokenizer, config.eos_token_ids, context_length_),
      verifier_(config.speculative.accept_all_for_benchmark) {
  memory_plan_ = PlanModelMemory(config_, *model);
  model->AllocateMemory(memory_plan_);
  const int dp = model->dp_size();
  groups_ = MakeDpGroups(dp, memory_plan_, MakeSchedulerConfig(config_, dp), !config_.disable_radix_cache);
  if (!config_.disable_radix_cache && memory_plan_.num_state_slots > 0)
    Log(LogLevel::kInfo, "prefix cache off: the model keeps per-request state, which prefix hits cannot restore");
  if (dp > 1)
    Log(LogLevel::kInfo, "data-parallel attention: ", dp, " groups of ", memory_plan_.num_pages,
        " pages each, requests placed by ", config_.load_balance_method);
  runner_ = std::make_unique<ModelRunner>(model, config_.page_size);
  if (config_.speculative.enabled() && dp > 1)
    Fail("--speculative-algorithm with --dp-size ", dp, ": speculative decoding with data-parallel attention has "
         "not landed");
  if (config_.speculative.enabled()) {
    if (!model->has_draft())
      Fail("--speculative-algorithm ", config_.speculative.algorithm, ": the model (", model->architecture(),
           ") was loaded without a draft layer");
    drafter_ = std::make_unique<Drafter>(config_.speculative, config_.page_size, context_length_);
    if (config_.speculative.accept_all_for_benchmark)
      Log(LogLevel::kWarning, "*** --speculative-accept-all-for-benchmark: every draft is accepted, so the outputs "
          "are NOT the model's; for timing speculative decoding on dummy weights only ***");
  }
  published_stats_.free_pages = dp * groups_[0].pool->num_free();
  published_stats_.free_state_slots = num_state_slots();
  // Before any request, as SGLang does: with drafts, the verify and draft steps' graphs too.
  model->CaptureDecodeGraphs(drafter_ ? config_.speculative.drafts() : 0);
}

Engine::~Engine() {
  Stop();
  // Sequences let go of their pages before the prefix cache and the pool go away.
  for (auto& [id, state] : requests_)
    for (auto& seq : state.sequences)
      if (!seq->finished()) scheduler_of(seq.get()).Finish(seq.get());
}

void Engine::Validate(const std::vector<std::int32_t>& prompt, const SamplingParams& params) const {
  if (prompt.empty()) Fail("prompt_ids must not be empty");
  for (std::size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab_size_)
      Fail("prompt_ids[", i, "] must be in [0, ", vocab_size_, "), got ", prompt[i]);
  const std::int64_t capacity = kv_capacity_tokens();
  if (static_cast<std::int64_t>(prompt.size()) >= context_length_)
    Fail("the prompt has ", prompt.size(), " tokens; it must be shorter than the context length ", context_length_);
  if (static_cast<std::int64_t>(prompt.size()) > capacity)
    Fail("the prompt has ", prompt.size(), " tokens, more than the KV cache holds (", capacity,
         " tokens; raise --max-total-tokens)");
  params.Validate(vocab_size_);
  // Admission: a sequence that could outgrow the whole cache would fail part-way (the last token
  // it samples is never computed, hence the - 1).
  const std::int64_t needed = static_cast<std::int64_t>(prompt.size()) + params.max_new_tokens - 1;
  if (needed > capacity)
    Fail("the request needs up to ", needed, " tokens of KV cache (", prompt.size(), " in the prompt, ",
         params.max_new_tokens, " to generate) and the cache holds ", capacity,
         " tokens; lower max_new_tokens or raise --max-total-tokens");
  if (!params.stop.empty() && outputs_.detokenizer() == nullptr)
    Fail("stop strings need a tokenizer to match text; none is loaded (use stop_token_ids)");
}

std::int64_t Engine::Submit(Request request) {
  Validate(request.prompt_ids, request.params);
  std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t id = next_request_id_++;
  incoming_.push_back({id, std::move(request)});
  ++live_requests_;
  wake_.notify_all();
  return id;
}

void Engine::Abort(std::int64_t request_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  aborts_.push_back(request_id);
  wake_.notify_all();
}

bool Engine::HasWork() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_requests_ > 0 || !incoming_.empty() || !aborts_.empty() || flush_requested_;
}

void Engine::RequestFlushCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  flush_requested_ = true;
  wake_.notify_all();
}

void Engine::DrainIncoming() {
  std::vector<Submitted> incoming;
  std::vector<std::int64_t> aborts;
  bool flush = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming.swap(incoming_);
    aborts.swap(aborts_);
    std::swap(flush, flush_requested_);
  }
  if (flush)
    for (DpGroup& g : groups_)
      if (g.prefix_cache) g.prefix_cache->Evict(g.prefix_cache->num_pages());
  for (Submitted& s : incoming) {
    RequestState& state = requests_[s.id];
    const int group = balancer_.Pick(groups_);
    state.callback = std::move(s.request.callback);
    auto params = std::make_shared<const SamplingParams>(std::move(s.request.params));
    for (std::int32_t i = 0; i < params->n; ++i) {
      auto seq = std::make_unique<Sequence>();
      seq->request_id = s.id;
      seq->index = i;
      seq->arrival = next_arrival_++;
      seq->params = params;
      const std::uint64_t base = params->seed ? *params->seed : MixSeed(config_.random_seed, static_cast<std::uint64_t>(s.id));
      seq->seed = MixSeed(base, static_cast<std::uint64_t>(i));
      seq->dp_group = group;
      seq->tokens = s.request.prompt_ids;
      seq->prompt_len = static_cast<std::int32_t>(seq->tokens.size());
      if (params->repetition_penalty != 1.0) seq->seen_tokens.insert(seq->tokens.begin(), seq->tokens.end());
      Sequence* raw = seq.get();
      state.sequences.push_back(std::move(seq));
      ++state.unfinished;
      if (params->constraint) raw->matcher = params->constraint->NewMatcher();
      // A constraint that admits only the empty output ends the sequence at once.
      const bool constraint_done = raw->matcher != nullptr && raw->matcher->IsTerminated();
      if ((params->max_new_tokens == 0 || constraint_done) && !params->prompt_logprobs) {
        OutputProcessor::SetFinished(raw, constraint_done ? FinishReason::kStop : FinishReason::kLength);
        raw->status = SequenceStatus::kFinished;
        touched_.push_back(raw);
      } else if (i > 0 && groups_[group].prefix_cache != nullptr) {
        state.held.push_back(raw);
      } else {
        groups_[group].scheduler->Add(raw);
      }
    }
  }
  for (std::int64_t id : aborts) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    it->second.held.clear();
    for (auto& seq : it->second.sequences)
      if (!seq->finished()) FinishSequence(seq.get(), FinishReason::kAbort, "");
  }
}

void Engine::FinishSequence(Sequence* seq, FinishReason reason, const std::string& error) {
  OutputProcessor::SetFinished(seq, reason, error);
  scheduler_of(seq).Finish(seq);
  touched_.push_back(seq);
  // Completion 0 ended (a client abort has already dropped the held ones): the others run alone.
  if (seq->index == 0) ReleaseHeld(seq);
}

void Engine::ReleaseHeld(const Sequence* seq) {
  auto it = requests_.find(seq->request_id);
  if (it == requests_.end() || it->second.held.empty()) return;
  for (Sequence* held : it->second.held)
    if (!held->finished()) scheduler_of(held).Add(held);
  it->second.held.clear();
}

std::vector<StepPlan> Engine::ScheduleGroups() {
  std::vector<StepPlan> plans(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    plans[g] = groups_[g].scheduler->Schedule();
    for (Sequence* seq : plans[g].failed)
      FinishSequence(seq, FinishReason::kAbort,
                     StrCat("the sequence needs more KV cache than the pool holds (",
                            static_cast<std::int64_t>(num_pages()) * config_.page_size,
                            " tokens); raise --max-total-tokens"));
  }
  return plans;
}

bool Engine::RunGroups(std::vector<StepPlan>* plans) {
  const std::size_t n = plans->size();
  std::vector<std::vector<LogitsRows>> rows;
  std::vector<std::vector<ItemSamples>> where(n);
  std::vector<std::vector<kernels::SampledToken>> results(n);
  std::vector<VerifiedRun> verified;
  try {
    const std::vector<model::StepLogits> logits = runner_->RunGroups(*plans, &rows);
    for (std::size_t g = 0; g < n; ++g) {
      if ((*plans)[g].empty()) continue;
      sampler_.SampleStep((*plans)[g], rows[g], logits[g], &where[g], &results[g]);
      if (drafter_) verifier_.Verify((*plans)[g], rows[g], logits[g], sampler_, &verified);
    }
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "model step failed: ", e.what());
    for (const StepPlan& plan : *plans)
      for (const ScheduledSequence& item : plan.items)
        FinishSequence(item.seq, FinishReason::kAbort, StrCat("the model failed: ", e.what()));
    return false;
  }
  for (std::size_t g = 0; g < n; ++g) {
    StepPlan& plan = (*plans)[g];
    if (plan.empty()) continue;
    if (drafter_) ApplyVerified(&plan, verified);
    groups_[g].scheduler->Commit(plan);
    ProcessStep(plan, where[g], results[g], verified);
    if (drafter_) RunDraftSteps(plan);  // one group: speculative decoding is refused with DP
  }
  return true;
}

bool Engine::Step() {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t touched_before = touched_.size();
  DrainIncoming();
  std::vector<StepPlan> plans = ScheduleGroups();
  bool did_work = touched_.size() > touched_before;
  std::int64_t prefill_tokens = 0;
  bool any = false;
  for (const StepPlan& plan : plans) {
    did_work = did_work || !plan.failed.empty();
    any = any || !plan.empty();
    prefill_tokens += plan.num_prefill_tokens;
  }
  if (any) {
    did_work = true;
    RunGroups(&plans);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++local_stats_.steps;
    if (prefill_tokens > 0) {
      local_stats_.prefill_seconds += seconds;
    } else {
      local_stats_.decode_seconds += seconds;
      if (drafter_ && ++decode_steps_since_log_ >= kSpeculativeLogInterval) LogSpeculativeDecode();
    }
    if ((dp_size() > 1 || local_stats_.expert_load.size() > 1) && ++steps_since_parallel_log_ >= kStepLogInterval)
      LogParallelStep();
  }
  Report();
  return did_work;
}

void Engine::LogParallelStep() {
  const std::vector<std::int64_t> load = model_->ExpertLoad();
  std::string queues, loads;
  std::int64_t pairs = 0;
  for (const DpGroup& g : groups_)
    queues += StrCat(queues.empty() ? "" : " ", g.scheduler->running().size(), "/", g.scheduler->num_waiting());
  for (std::size_t r = 0; r < load.size(); ++r) {
    const std::int64_t since = load[r] - (r < logged_load_.size() ? logged_load_[r] : 0);
    loads += StrCat(loads.empty() ? "" : " ", since);
    pairs += since;
  }
  Log(LogLevel::kInfo, "Parallel step ", local_stats_.steps, ": #running/#queue per DP group [", queues,
      "], expert load per EP rank over the last ", steps_since_parallel_log_, " steps [", loads, "] (", pairs,
      " token-expert pairs)");
  logged_load_ = load;
  steps_since_parallel_log_ = 0;
}

void Engine::LogSpeculativeDecode() {
  // SGLang's decode log line, with the acceptance since the previous one.
  const EngineStats& s = local_stats_;
  const std::int64_t runs = s.spec_verify_runs - logged_.spec_verify_runs;
  const std::int64_t drafts = s.spec_draft_tokens - logged_.spec_draft_tokens;
  const std::int64_t accepted = s.spec_accepted_tokens - logged_.spec_accepted_tokens;
  Log(LogLevel::kInfo, "Decode batch: #running-req ", groups_[0].scheduler->running().size(), ", accept len ",
      runs > 0 ? static_cast<double>(accepted + runs) / runs : 0.0, ", accept rate ",
      drafts > 0 ? static_cast<double>(accepted) / drafts : 0.0, " (", accepted, " of ", drafts, " drafts in ", runs,
      " verify runs)");
  logged_ = s;
  decode_steps_since_log_ = 0;
}

void Engine::ApplyVerified(StepPlan* plan, const std::vector<VerifiedRun>& verified) {
  for (std::size_t k = 0; k < plan->items.size(); ++k) {
    ScheduledSequence& item = plan->items[k];
    if (item.num_drafts == 0) continue;
    item.num_rejected = item.num_drafts - verified[k].accepted;
    ++local_stats_.spec_verify_runs;
    local_stats_.spec_draft_tokens += item.num_drafts;
    local_stats_.spec_accepted_tokens += verified[k].accepted;
  }
}

void Engine::RunDraftSteps(const StepPlan& plan) {
  try {
    drafter_->Propose(plan, runner_->last_batch(), *model_, *groups_[0].scheduler, sampler_);
  } catch (const std::exception& e) {
    Log(LogLevel::kError, "draft step failed: ", e.what());
    for (const ScheduledSequence& item : plan.items)
      if (!item.seq->finished()) FinishSequence(item.seq, FinishReason::kAbort, StrCat("the draft model failed: ", e.what()));
  }
  local_stats_.spec_draft_steps = drafter_->counters().draft_steps;
}

void Engine::ProcessStep(const StepPlan& plan, const std::vector<ItemSamples>& where,
                         const std::vector<kernels::SampledToken>& results, const std::vector<VerifiedRun>& verified) {
  std::int64_t sampled = 0;
  for (std::size_t k = 0; k < plan.items.size(); ++k) {
    const ScheduledSequence& item = plan.items[k];
    Sequence* seq = item.seq;
    for (std::int32_t pos = item.prompt_logprob_begin; pos < item.prompt_logprob_end; ++pos) {
      FISSION_CHECK_EQ(static_cast<std::int32_t>(seq->prompt_logprobs.size()), pos);
      const kernels::SampledToken& r = results[where[k].prompt_logprobs_begin + (pos - item.prompt_logprob_begin)];
      seq->prompt_logprobs.push_back(Sampler::ToTokenLogprob(r));
      touched_.push_back(seq);
    }
    if (!item.sample) continue;
    if (item.num_drafts > 0) {
      // The verify run's tokens in order, until one ends the sequence (a stop string or token
      // mid-draft, max_new_tokens): the rest are dropped.
      for (const kernels::SampledToken& token : verified[k].tokens) {
        sampled += AppendSampled(seq, token);
        if (seq->finish_reason != FinishReason::kNone) break;
      }
    } else if (where[k].sample < 0) {
      OutputProcessor::SetFinished(seq, FinishReason::kLength);
    } else {
      sampled += AppendSampled(seq, results[where[k].sample]);
    }
    if (seq->index == 0 && seq->num_output() == 1) ReleaseHeld(seq);
    touched_.push_back(seq);
    if (seq->finish_reason != FinishReason::kNone) FinishSequence(seq, seq->finish_reason, seq->error);
  }
  local_stats_.generated_tokens += sampled;
  if (plan.num_prefill_tokens == 0) local_stats_.decode_only_tokens += sampled;
}

bool Engine::AppendSampled(Sequence* seq, const kernels::SampledToken& r) {
  const SamplingParams& p = *seq->params;
  if (!AdvanceMatcher(seq, r.token)) {
    OutputProcessor::SetFinished(seq, FinishReason::kAbort,
                                 StrCat("the constrained output (", p.constraint->Describe(),
                                        ") cannot continue: no token of the vocabulary is allowed after ",
                                        seq->num_output(), " tokens"));
    return false;
  }
  const TokenLogprob logprob = p.logprobs ? Sampler::ToTokenLogprob(r) : TokenLogprob{};
  try {
    // Decoding text goes through the detokenizer, which is not ours: contain its failures.
    outputs_.Append(seq, r.token, p.logprobs ? &logprob : nullptr);
  } catch (const std::exception& e) {
    OutputProcessor::SetFinished(seq, FinishReason::kAbort, StrCat("detokenizing failed: ", e.what()));
  }
  // The constraint is satisfied and admits nothing more.
  if (seq->matcher != nullptr && seq->finish_reason == FinishReason::kNone && seq->matcher->IsTerminated())
    OutputProcessor::SetFinished(seq, FinishReason::kStop);
  return true;
}

bool Engine::AdvanceMatcher(Sequence* seq, std::int32_t token) {
  if (seq->matcher == nullptr) return true;
  // A token that ends a complete output is the engine's, not the grammar's.
  if (seq->matcher->IsComplete() && sampler_.IsEndToken(*seq, token) && seq->num_output() + 1 >= seq->params->min_new_tokens)
    return true;
  return seq->matcher->Accept(token);
}

void Engine::Report() {
  std::sort(touched_.begin(), touched_.end());
  touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
  // Report in FCFS order, so callbacks see a stable order.
  std::sort(touched_.begin(), touched_.end(), [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
  std::int64_t finished_requests = 0;
  RequestOutput out;
  for (Sequence* seq : touched_) {
    auto it = requests_.find(seq->request_id);
    FISSION_CHECK(it != requests_.end());
    RequestState& state = it->second;
    const bool finished = seq->finished();
    if (outputs_.MakeReport(seq, finished, &out) && state.callback) {
      try {
        state.callback(out);
      } catch (const std::exception& e) {
        Log(LogLevel::kError, "output callback of request ", seq->request_id, " threw: ", e.what());
      }
    }
    if (finished && --state.unfinished == 0) {
      requests_.erase(it);  // destroys the sequences
      ++finished_requests;
    }
  }
  touched_.clear();

  // Counters over every DP group.
  EngineStats& st = local_stats_;
  st.computed_prompt_tokens = st.prefix_hit_tokens = st.preemptions = st.evicted_pages = 0;
  st.running = st.waiting = st.free_pages = st.cached_pages = st.free_state_slots = 0;
  st.dp_running.clear();
  st.dp_waiting.clear();
  for (const DpGroup& g : groups_) {
    const SchedulerCounters& c = g.scheduler->counters();
    st.computed_prompt_tokens += c.computed_prompt_tokens;
    st.prefix_hit_tokens += c.prefix_hit_tokens;
    st.preemptions += c.preemptions;
    st.evicted_pages += c.evicted_pages;
    st.dp_running.push_back(static_cast<std::int32_t>(g.scheduler->running().size()));
    st.dp_waiting.push_back(static_cast<std::int32_t>(g.scheduler->num_waiting()));
    st.running += st.dp_running.back();
    st.waiting += st.dp_waiting.back();
    st.free_pages += g.pool->num_free();
    st.cached_pages += g.prefix_cache ? g.prefix_cache->num_pages() : 0;
    st.free_state_slots += g.states ? g.states->num_free() : 0;
  }
  st.expert_load = model_->ExpertLoad();
  st.mask_seconds = sampler_.mask_seconds();
  st.masks = sampler_.masks();
  std::lock_guard<std::mutex> lock(mutex_);
  live_requests_ -= finished_requests;
  published_stats_ = local_stats_;
}

void Engine::RunUntilIdle() {
  int idle_steps = 0;
  while (HasWork()) {
    if (Step()) {
      idle_steps = 0;
    } else {
      FISSION_CHECK(++idle_steps < 3, "the engine has requests but cannot schedule any");
    }
  }
}

void Engine::Start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] {
          return stop_ || live_requests_ > 0 || !incoming_.empty() || !aborts_.empty() || flush_requested_;
        });
        if (stop_) return;
      }
      Step();
    }
  });
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return published_stats_;
}

std::string Engine::CheckPageAccounting() const {
  for (int g = 0; g < dp_size(); ++g) {
    std::string problem = CheckGroupAccounting(g);
    if (!problem.empty()) return dp_size() > 1 ? StrCat("DP group ", g, ": ", problem) : problem;
  }
  return "";
}

std::string Engine::CheckGroupAccounting(int group) const {
  const DpGroup& g = groups_[group];
  std::vector<std::int32_t> expected(g.pool->num_pages(), 0);
  const std::int32_t slots = g.states ? g.states->num_slots() : 0;
  std::vector<int> slot_holders(slots, 0);
  for (const auto& [id, state] : requests_) {
    for (const auto& seq : state.sequences) {
      if (seq->dp_group != group) continue;
      if (seq->finished() && !seq->pages.empty()) return StrCat("finished sequence ", id, " still holds pages");
      if (seq->status == SequenceStatus::kWaiting && !seq->pages.empty())
        return StrCat("waiting sequence ", id, " holds pages");
      for (std::int32_t page : seq->pages) ++expected[page];
      const bool running = seq->status == SequenceStatus::kRunning;
      if (g.states != nullptr && running != (seq->state_slot >= 0))
        return StrCat(running ? "running" : "not running", " sequence ", id, " holds state slot ", seq->state_slot);
      if (seq->state_slot >= 0) ++slot_holders.at(seq->state_slot);
    }
  }
  for (std::int32_t slot = 0; slot < slots; ++slot)
    if (slot_holders[slot] != (g.states->used(slot) ? 1 : 0))
      return StrCat("state slot ", slot, " is ", g.states->used(slot) ? "used" : "free", " but has ",
                    slot_holders[slot], " holders");
  if (g.prefix_cache) g.prefix_cache->ForEachPage([&](std::int32_t page) { ++expected[page]; });
  std::int32_t free = 0;
  for (std::int32_t page = 0; page < g.pool->num_pages(); ++page) {
    if (expected[page] != g.pool->ref_count(page))
      return StrCat("page ", page, " has ", g.pool->ref_count(page), " references but ", expected[page], " holders");
    free += expected[page] == 0;
  }
  if (free != g.pool->num_free())
    return StrCat(free, " pages have no holder but the pool lists ", g.pool->num_free(), " free");
  return "";
}

}  // namespace fission::engine
