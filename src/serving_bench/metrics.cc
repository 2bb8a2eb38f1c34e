#include "serving_bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "tokenizer/tokenizer.h"

namespace fission::serving_bench {

namespace {

std::int64_t OutputTokens(const RequestOutput& o, const tokenizer::Tokenizer* tok) {
  if (o.usage_output_tokens) return *o.usage_output_tokens;
  if (tok) return static_cast<std::int64_t>(tok->Encode(o.generated_text, /*add_special_tokens=*/false).size());
  return o.token_chunks;
}

// bench_serving's peak output tokens per second: tokens counted in one-second buckets from the
// first successful request's start.
double PeakTokensPerSecond(const std::vector<RequestOutput>& outputs) {
  double min_start = INFINITY;
  double max_end = -INFINITY;
  for (const RequestOutput& o : outputs) {
    if (!o.success) continue;
    min_start = std::min(min_start, o.start_time);
    max_end = std::max(max_end, o.start_time + o.latency);
  }
  if (min_start == INFINITY) return 0;
  const auto buckets = static_cast<std::int64_t>(std::ceil(max_end - min_start)) + 1;
  std::vector<double> tokens(buckets, 0.0);
  for (const RequestOutput& o : outputs) {
    if (!o.success) continue;
    double t = o.start_time + o.ttft;
    auto count = [&](double time) {
      const auto b = static_cast<std::int64_t>(time - min_start);  // truncation, as int() does
      if (b >= 0 && b < buckets) tokens[b] += 1;
    };
    count(t);
    for (double gap : o.itl) {
      t += gap;
      count(t);
    }
  }
  return *std::max_element(tokens.begin(), tokens.end());
}

// The most successful requests in flight at one instant: a sweep over [start, start + latency).
// A request that ends when another starts does not overlap it; the nanosecond allowance keeps the
// rounding of start + latency from making a freed slot's next request overlap its predecessor.
int PeakConcurrentRequests(const std::vector<RequestOutput>& outputs) {
  constexpr double kAllowance = 1e-9;
  std::vector<std::pair<double, int>> events;  // (time, +1 start / -1 end)
  for (const RequestOutput& o : outputs) {
    if (!o.success) continue;
    events.emplace_back(o.start_time, +1);
    events.emplace_back(o.start_time + o.latency - kAllowance, -1);
  }
  std::sort(events.begin(), events.end());  // at equal times the end (-1) sorts first
  int running = 0, peak = 0;
  for (const auto& [time, delta] : events) {
    running += delta;
    peak = std::max(peak, running);
  }
  return peak;
}

}  // namespace

BenchmarkMetrics CalculateMetrics(const std::vector<RequestOutput>& outputs, double duration_s,
                                  const tokenizer::Tokenizer* tokenizer, const Goodput& goodput) {
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, itls, e2es;
  for (const RequestOutput& o : outputs) {
    if (!o.success) {
      m.failed++;
      m.failure_reasons[o.error]++;
      m.output_lens.push_back(0);
      continue;
    }
    const std::int64_t output_len = OutputTokens(o, tokenizer);
    m.output_lens.push_back(output_len);
    m.total_output += output_len;
    m.total_output_retokenized +=
        tokenizer ? static_cast<std::int64_t>(tokenizer->Encode(o.generated_text, false).size()) : output_len;
    m.total_input += o.prompt_len;
    // A one-token response has no TPOT; goodput counts its TPOT as 0 (always within the SLO).
    double tpot = 0;
    if (output_len > 1) {
      tpot = (o.latency - o.ttft) / static_cast<double>(output_len - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), o.itl.begin(), o.itl.end());
    ttfts.push_back(o.ttft);
    e2es.push_back(o.latency);
    m.completed++;
    if (goodput.enabled()) {
      // Compared in seconds, as vLLM does, so that boundary cases round the same way.
      const bool good = (!goodput.ttft_ms || *goodput.ttft_ms / 1000.0 >= o.ttft) &&
                        (!goodput.tpot_ms || *goodput.tpot_ms / 1000.0 >= tpot) &&
                        (!goodput.e2el_ms || *goodput.e2el_ms / 1000.0 >= o.latency);
      if (good) m.good_completed++;
    }
  }
  const double d = duration_s > 0 ? duration_s : 1e-9;
  m.request_throughput = m.completed / d;
  m.request_goodput = m.good_completed / d;
  m.input_throughput = static_cast<double>(m.total_input) / d;
  m.output_throughput = static_cast<double>(m.total_output) / d;
  m.total_throughput = static_cast<double>(m.total_input + m.total_output) / d;
  double latency_sum = 0;
  for (double e : e2es) latency_sum += e;
  m.concurrency = latency_sum / d;
  m.ttft_ms = Summary(ttfts).Scaled(1000.0);
  m.tpot_ms = Summary(tpots).Scaled(1000.0);
  m.itl_ms = Summary(itls).Scaled(1000.0);
  m.e2e_ms = Summary(e2es).Scaled(1000.0);
  m.max_output_tokens_per_s = PeakTokensPerSecond(outputs);
  m.max_concurrent_requests = PeakConcurrentRequests(outputs);
  return m;
}

}  // namespace fission::serving_bench
