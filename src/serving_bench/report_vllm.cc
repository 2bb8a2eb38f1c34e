// vLLM's benchmark_serving block, as ATOM's copy of it prints it.
#include <string>
#include <vector>

#include "base/error.h"
#include "serving_bench/block_format.h"
#include "serving_bench/report.h"

namespace fission::serving_bench {

namespace {

struct VllmSection {
  const char* key;    // --percentile-metrics name
  const char* title;  // rule text
  const char* label;  // metric name inside labels
  const Summary BenchmarkMetrics::*summary;
};

// In the order vLLM prints them.
const std::vector<VllmSection>& VllmSections() {
  static const std::vector<VllmSection> kSections = {
      {"ttft", "Time to First Token", "TTFT", &BenchmarkMetrics::ttft_ms},
      {"tpot", "Time per Output Token (excl. 1st token)", "TPOT", &BenchmarkMetrics::tpot_ms},
      {"itl", "Inter-token Latency", "ITL", &BenchmarkMetrics::itl_ms},
      {"e2el", "End-to-end Latency", "E2EL", &BenchmarkMetrics::e2e_ms},
  };
  return kSections;
}

bool Wanted(const std::vector<std::string>& metrics, const std::string& key) {
  const std::vector<std::string> defaults = {"ttft", "tpot", "itl"};  // vLLM's --percentile-metrics default
  for (const std::string& m : metrics.empty() ? defaults : metrics) {
    if (m == key) return true;
  }
  return false;
}

}  // namespace

std::string FormatVllmResultBlock(const ReportConfig& c, const BenchmarkMetrics& m) {
  std::string out = BlockRule(" Serving Benchmark Result ", '=');
  out += BlockRow("Successful requests:", std::to_string(m.completed));
  out += BlockRow("Benchmark duration (s):", Fixed2(c.duration_s));
  out += BlockRow("Total input tokens:", std::to_string(m.total_input));
  out += BlockRow("Total generated tokens:", std::to_string(m.total_output));
  out += BlockRow("Request throughput (req/s):", Fixed2(m.request_throughput));
  if (c.goodput) out += BlockRow("Request goodput (req/s):", Fixed2(m.request_goodput));
  out += BlockRow("Output token throughput (tok/s):", Fixed2(m.output_throughput));
  out += BlockRow("Total Token throughput (tok/s):", Fixed2(m.total_throughput));
  out += BlockRow("Concurrency:", Fixed2(m.concurrency));
  if (c.accept_length && *c.accept_length != 0) out += BlockRow("Accept length:", Fixed2(*c.accept_length));
  const std::vector<double> percentiles = c.metric_percentiles.empty() ? std::vector<double>{99} : c.metric_percentiles;
  for (const VllmSection& s : VllmSections()) {
    if (!Wanted(c.percentile_metrics, s.key)) continue;
    const Summary& sum = m.*(s.summary);
    out += BlockRule(s.title, '-');
    out += BlockRow(StrCat("Mean ", s.label, " (ms):"), Fixed2(sum.mean()));
    out += BlockRow(StrCat("Median ", s.label, " (ms):"), Fixed2(sum.median()));
    for (double p : percentiles) out += BlockRow(StrCat(PercentileName(p), " ", s.label, " (ms):"), Fixed2(sum.Percentile(p)));
  }
  out += std::string(50, '=') + "\n";
  return out;
}

}  // namespace fission::serving_bench
