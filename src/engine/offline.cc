#include "engine/offline.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "base/error.h"

namespace fission::engine {
namespace {

// `now`'s counters less `then`'s (the gauges are `now`'s).
EngineStats CountersSince(EngineStats now, const EngineStats& then) {
  now.steps -= then.steps;
  now.computed_prompt_tokens -= then.computed_prompt_tokens;
  now.prefix_hit_tokens -= then.prefix_hit_tokens;
  now.generated_tokens -= then.generated_tokens;
  now.decode_only_tokens -= then.decode_only_tokens;
  now.preemptions -= then.preemptions;
  now.evicted_pages -= then.evicted_pages;
  now.prefill_seconds -= then.prefill_seconds;
  now.decode_seconds -= then.decode_seconds;
  now.mask_seconds -= then.mask_seconds;
  now.masks -= then.masks;
  now.spec_verify_runs -= then.spec_verify_runs;
  now.spec_draft_tokens -= then.spec_draft_tokens;
  now.spec_accepted_tokens -= then.spec_accepted_tokens;
  now.spec_draft_steps -= then.spec_draft_steps;
  return now;
}

}  // namespace

OfflineReport RunOffline(Engine& engine, const std::vector<OfflinePrompt>& prompts) {
  OfflineReport report;
  report.outputs.resize(prompts.size());
  const EngineStats before = engine.stats();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::int64_t> ids;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    report.outputs[i].resize(prompts[i].params.n);
    report.prompt_tokens += static_cast<std::int64_t>(prompts[i].prompt_ids.size());
    Request request;
    request.prompt_ids = prompts[i].prompt_ids;
    request.params = prompts[i].params;
    std::vector<OfflineCompletion>* slot = &report.outputs[i];
    request.callback = [slot](const RequestOutput& out) {
      OfflineCompletion& c = (*slot)[out.index];
      c.token_ids.insert(c.token_ids.end(), out.token_ids.begin(), out.token_ids.end());
      c.text += out.text;
      c.logprobs.insert(c.logprobs.end(), out.logprobs.begin(), out.logprobs.end());
      c.prompt_logprobs.insert(c.prompt_logprobs.end(), out.prompt_logprobs.begin(), out.prompt_logprobs.end());
      c.cached_tokens = out.cached_tokens;
      if (out.finished) {
        c.finish_reason = out.finish_reason;
        c.error = out.error;
      }
    };
    try {
      ids.push_back(engine.Submit(std::move(request)));
    } catch (const Error& e) {
      for (std::int64_t id : ids) engine.Abort(id);
      engine.RunUntilIdle();
      Fail("prompt ", i, ": ", e.what());
    }
  }
  engine.RunUntilIdle();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.stats = CountersSince(engine.stats(), before);
  return report;
}

std::string ThroughputSummary(const OfflineReport& report) {
  const EngineStats& s = report.stats;
  auto rate = [](double tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  char buffer[768];
  std::snprintf(buffer, sizeof(buffer),
                "requests: %zu, prompt tokens: %lld (computed %lld, from the prefix cache %lld), generated tokens: %lld\n"
                "prefill: %lld tokens in %.3f s, %.1f tokens/s (steps with prompt work)\n"
                "decode:  %lld tokens in %.3f s, %.1f tokens/s (steps with decode work only)\n"
                "total:   %.3f s, %.1f generated tokens/s, %lld steps, %lld preemptions\n",
                report.outputs.size(), static_cast<long long>(report.prompt_tokens),
                static_cast<long long>(s.computed_prompt_tokens), static_cast<long long>(s.prefix_hit_tokens),
                static_cast<long long>(s.generated_tokens), static_cast<long long>(s.computed_prompt_tokens),
                s.prefill_seconds, rate(static_cast<double>(s.computed_prompt_tokens), s.prefill_seconds),
                static_cast<long long>(s.decode_only_tokens), s.decode_seconds,
                rate(static_cast<double>(s.decode_only_tokens), s.decode_seconds), report.seconds,
                rate(static_cast<double>(s.generated_tokens), report.seconds), static_cast<long long>(s.steps),
                static_cast<long long>(s.preemptions));
  std::string summary = buffer;
  if (s.spec_verify_runs > 0) {
    std::snprintf(buffer, sizeof(buffer),
                  "speculative: %lld verify runs, %lld of %lld drafts accepted, accept length %.3f, %lld draft steps\n",
                  static_cast<long long>(s.spec_verify_runs), static_cast<long long>(s.spec_accepted_tokens),
                  static_cast<long long>(s.spec_draft_tokens), s.spec_accept_length(),
                  static_cast<long long>(s.spec_draft_steps));
    summary += buffer;
  }
  return summary;
}

}  // namespace fission::engine
