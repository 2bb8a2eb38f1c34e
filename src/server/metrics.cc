#include "server/metrics.h"

#include <cstdio>

#include "base/error.h"

namespace fission::server {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void Line(std::string* out, const std::string& name, const std::string& labels, double value) {
  *out += name + "{" + labels + "} " + Num(value) + "\n";
}

void Help(std::string* out, const std::string& name, const char* type, const char* help) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Histogram::Observe(double value) {
  std::size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::Render(const std::string& name, const std::string& labels, std::string* out) const {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? Num(bounds_[i]) : "+Inf";
    *out += name + "_bucket{" + labels + ",le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  Line(out, name + "_sum", labels, sum_);
  Line(out, name + "_count", labels, static_cast<double>(count_));
}

Metrics::Metrics(std::string model_name)
    : labels_("model_name=\"" + model_name + "\""),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 20, 25, 30}),
      itl_({0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
            0.75, 1.0, 2.5}),
      e2e_({0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 90, 120, 150, 180, 240, 300}),
      tpot_({0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
             0.75, 1.0, 2.5}) {}

void Metrics::TimePerOutputToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  tpot_.Observe(seconds);
}

void Metrics::RequestStarted() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_total_;
}

void Metrics::RequestFinished(const std::string& status, std::int64_t prompt_tokens, std::int64_t generation_tokens,
                              double e2e_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (status == "success") {
    ++requests_success_;
  } else if (status == "abort") {
    ++requests_abort_;
  } else {
    ++requests_error_;
  }
  prompt_tokens_total_ += static_cast<std::uint64_t>(prompt_tokens);
  generation_tokens_total_ += static_cast<std::uint64_t>(generation_tokens);
  e2e_.Observe(e2e_seconds);
}

void Metrics::FirstToken(double ttft_seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.Observe(ttft_seconds);
}

void Metrics::InterToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  itl_.Observe(seconds);
}

std::string Metrics::Render(const engine::Engine& engine, std::int64_t in_flight) const {
  const engine::EngineStats s = engine.stats();
  // Every DP attention group has a pool of num_pages(); the stats sum them.
  const double total_pages = static_cast<double>(engine.num_pages()) * engine.dp_size();
  const double used_pages = total_pages - s.free_pages;
  const double looked_up = static_cast<double>(s.prefix_hit_tokens + s.computed_prompt_tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_scrape_).count();
  if (last_generated_ < 0 || since >= 1.0) {
    if (last_generated_ >= 0) throughput_ = static_cast<double>(s.generated_tokens - last_generated_) / since;
    last_generated_ = s.generated_tokens;
    last_scrape_ = now;
  }
  std::string out;
  const std::string& l = labels_;
  Help(&out, "sglang:num_running_reqs", "gauge", "Requests being decoded or prefilled.");
  Line(&out, "sglang:num_running_reqs", l, s.running);
  Help(&out, "sglang:num_queue_reqs", "gauge", "Requests waiting to be scheduled.");
  Line(&out, "sglang:num_queue_reqs", l, s.waiting);
  Help(&out, "sglang:token_usage", "gauge", "Fraction of KV pages in use (prefix-cache pages included).");
  Line(&out, "sglang:token_usage", l, total_pages > 0 ? used_pages / total_pages : 0.0);
  Help(&out, "sglang:cache_hit_rate", "gauge", "Prompt tokens served by the prefix cache over all prompt tokens.");
  Line(&out, "sglang:cache_hit_rate", l, looked_up > 0 ? s.prefix_hit_tokens / looked_up : 0.0);
  Help(&out, "sglang:prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  Line(&out, "sglang:prompt_tokens_total", l, static_cast<double>(prompt_tokens_total_));
  Help(&out, "sglang:generation_tokens_total", "counter", "Generated tokens of finished requests.");
  Line(&out, "sglang:generation_tokens_total", l, static_cast<double>(generation_tokens_total_));
  Help(&out, "sglang:num_requests_total", "counter", "Requests received.");
  Line(&out, "sglang:num_requests_total", l, static_cast<double>(requests_total_));
  Help(&out, "fission:requests_finished_total", "counter", "Finished requests by outcome.");
  Line(&out, "fission:requests_finished_total", l + ",status=\"success\"", static_cast<double>(requests_success_));
  Line(&out, "fission:requests_finished_total", l + ",status=\"error\"", static_cast<double>(requests_error_));
  Line(&out, "fission:requests_finished_total", l + ",status=\"abort\"", static_cast<double>(requests_abort_));
  Help(&out, "fission:requests_in_flight", "gauge", "Requests accepted and not yet answered.");
  Line(&out, "fission:requests_in_flight", l, static_cast<double>(in_flight));
  Help(&out, "fission:kv_pages_total", "gauge", "KV cache pages in the pool.");
  Line(&out, "fission:kv_pages_total", l, total_pages);
  Help(&out, "fission:kv_pages_free", "gauge", "KV cache pages free (held by no sequence and no prefix-cache entry).");
  Line(&out, "fission:kv_pages_free", l, s.free_pages);
  Help(&out, "fission:kv_pages_cached", "gauge", "KV cache pages held by the prefix cache.");
  Line(&out, "fission:kv_pages_cached", l, s.cached_pages);
  Help(&out, "fission:preemptions_total", "counter",
       "Sequences preempted because the KV cache ran out (their KV is dropped and recomputed later).");
  Line(&out, "fission:preemptions_total", l, static_cast<double>(s.preemptions));
  Help(&out, "fission:grammar_masks_total", "counter", "Token masks computed for constrained sequences (structured outputs).");
  Line(&out, "fission:grammar_masks_total", l, static_cast<double>(s.masks));
  Help(&out, "fission:grammar_mask_seconds_total", "counter", "Time the engine spent computing those masks.");
  Line(&out, "fission:grammar_mask_seconds_total", l, s.mask_seconds);
  if (engine.dp_size() > 1) {
    Help(&out, "fission:dp_running_reqs", "gauge", "Sequences running in each data-parallel attention group.");
    for (std::size_t g = 0; g < s.dp_running.size(); ++g)
      Line(&out, "fission:dp_running_reqs", StrCat(l, ",dp_rank=\"", g, "\""), s.dp_running[g]);
    Help(&out, "fission:dp_queue_reqs", "gauge", "Sequences waiting in each data-parallel attention group.");
    for (std::size_t g = 0; g < s.dp_waiting.size(); ++g)
      Line(&out, "fission:dp_queue_reqs", StrCat(l, ",dp_rank=\"", g, "\""), s.dp_waiting[g]);
  }
  if (!s.expert_load.empty()) {
    Help(&out, "fission:expert_load_total", "counter",
         "Token-expert pairs computed by each expert-parallel rank's routed experts, over all MoE layers.");
    for (std::size_t r = 0; r < s.expert_load.size(); ++r)
      Line(&out, "fission:expert_load_total", StrCat(l, ",ep_rank=\"", r, "\""), static_cast<double>(s.expert_load[r]));
  }
  if (engine.speculative()) {
    Help(&out, "sglang:spec_accept_length", "gauge",
         "Tokens a speculative verify run emits on average (accepted drafts plus the target's own).");
    Line(&out, "sglang:spec_accept_length", l, s.spec_accept_length());
    Help(&out, "fission:spec_accept_rate", "gauge", "Accepted draft tokens over the draft tokens verified.");
    Line(&out, "fission:spec_accept_rate", l, s.spec_accept_rate());
    Help(&out, "fission:spec_verify_runs_total", "counter", "Speculative verify runs (one per sequence and step).");
    Line(&out, "fission:spec_verify_runs_total", l, static_cast<double>(s.spec_verify_runs));
    Help(&out, "fission:spec_draft_tokens_total", "counter", "Draft tokens verified.");
    Line(&out, "fission:spec_draft_tokens_total", l, static_cast<double>(s.spec_draft_tokens));
    Help(&out, "fission:spec_accepted_tokens_total", "counter", "Draft tokens accepted.");
    Line(&out, "fission:spec_accepted_tokens_total", l, static_cast<double>(s.spec_accepted_tokens));
  }
  Help(&out, "sglang:time_to_first_token_seconds", "histogram", "Time to first token.");
  ttft_.Render("sglang:time_to_first_token_seconds", l, &out);
  Help(&out, "sglang:inter_token_latency_seconds", "histogram", "Time between streamed tokens.");
  itl_.Render("sglang:inter_token_latency_seconds", l, &out);
  Help(&out, "sglang:gen_throughput", "gauge", "Generated tokens per second since the previous scrape.");
  Line(&out, "sglang:gen_throughput", l, throughput_);
  Help(&out, "sglang:time_per_output_token_seconds", "histogram",
       "Per finished completion: time from its first to its last token over the tokens after the first.");
  tpot_.Render("sglang:time_per_output_token_seconds", l, &out);
  Help(&out, "sglang:e2e_request_latency_seconds", "histogram", "End-to-end request latency.");
  e2e_.Render("sglang:e2e_request_latency_seconds", l, &out);
  return out;
}

}  // namespace fission::server
