#include "serving_bench/report.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "serving_bench/block_format.h"

namespace fission::serving_bench {

namespace {

struct Section {
  const char* key;      // percentile-metrics name
  const char* title;    // rule text
  const char* label;    // metric name inside labels
  const char* json;     // metric name inside sglang's JSON keys
  const char* vllm;     // metric name inside vLLM's JSON keys ("e2el" for the end-to-end latency)
  const Summary BenchmarkMetrics::*summary;
  std::vector<double> default_percentiles;
  bool max;  // "Max ITL"
};

const std::vector<Section>& Sections() {
  static const std::vector<Section> kSections = {
      {"e2el", "End-to-End Latency", "E2E Latency", "e2e_latency", "e2el", &BenchmarkMetrics::e2e_ms, {90, 99}, false},
      {"ttft", "Time to First Token", "TTFT", "ttft", "ttft", &BenchmarkMetrics::ttft_ms, {99}, false},
      {"tpot", "Time per Output Token (excl. 1st token)", "TPOT", "tpot", "tpot", &BenchmarkMetrics::tpot_ms, {99}, false},
      {"itl", "Inter-Token Latency", "ITL", "itl", "itl", &BenchmarkMetrics::itl_ms, {95, 99}, true},
  };
  return kSections;
}

bool Selected(const ReportConfig& c, const std::string& key) {
  if (c.percentile_metrics.empty()) return true;
  for (const std::string& m : c.percentile_metrics) {
    if (m == key) return true;
  }
  return false;
}

std::string PercentileKey(double p) {
  std::string name = PercentileName(p);
  name[0] = 'p';
  return name;
}

}  // namespace

std::string PythonFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest round-trip, like repr()
  std::string s(buf, end);
  const double mag = std::fabs(v);
  if (s.find_first_of("e.") == std::string::npos && (mag < 1e16)) s += ".0";
  if (s.find('e') != std::string::npos) {
    // Python writes 1e+16 as "1e+16" and 1e-05 as "1e-05": a sign and at least two exponent digits.
    const size_t e = s.find('e');
    std::string mant = s.substr(0, e);
    std::string exp = s.substr(e + 1);
    char sign = '+';
    if (exp[0] == '-' || exp[0] == '+') {
      sign = exp[0] == '-' ? '-' : '+';
      exp = exp.substr(1);
    }
    if (exp.size() < 2) exp = "0" + exp;
    s = mant + "e" + sign + exp;
  }
  return s;
}

std::string PercentileName(double p) {
  if (p == std::floor(p)) return "P" + std::to_string(static_cast<long long>(p));
  return "P" + PythonFloat(p);
}

std::string FormatResultBlock(const ReportConfig& c, const BenchmarkMetrics& m) {
  std::string out = BlockRule(" Serving Benchmark Result ", '=');
  out += BlockRow("Backend:", c.backend);
  out += BlockRow("Traffic request rate:", PythonFloat(c.request_rate));
  out += BlockRow("Max request concurrency:", c.max_concurrency ? std::to_string(*c.max_concurrency) : "not set");
  out += BlockRow("Successful requests:", std::to_string(m.completed));
  out += BlockRow("Benchmark duration (s):", Fixed2(c.duration_s));
  out += BlockRow("Total input tokens:", std::to_string(m.total_input));
  out += BlockRow("Total input text tokens:", std::to_string(m.total_input));
  out += BlockRow("Total generated tokens:", std::to_string(m.total_output));
  out += BlockRow("Total generated tokens (retokenized):", std::to_string(m.total_output_retokenized));
  out += BlockRow("Request throughput (req/s):", Fixed2(m.request_throughput));
  if (c.goodput) out += BlockRow("Request goodput (req/s):", Fixed2(m.request_goodput));
  out += BlockRow("Input token throughput (tok/s):", Fixed2(m.input_throughput));
  out += BlockRow("Output token throughput (tok/s):", Fixed2(m.output_throughput));
  out += BlockRow("Peak output token throughput (tok/s):", Fixed2(m.max_output_tokens_per_s));
  out += BlockRow("Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  out += BlockRow("Total token throughput (tok/s):", Fixed2(m.total_throughput));
  out += BlockRow("Concurrency:", Fixed2(m.concurrency));
  if (c.accept_length && *c.accept_length != 0) out += BlockRow("Accept length:", Fixed2(*c.accept_length));
  for (const Section& s : Sections()) {
    if (!Selected(c, s.key)) continue;
    const Summary& sum = m.*(s.summary);
    out += BlockRule(s.title, '-');
    out += BlockRow(StrCat("Mean ", s.label, " (ms):"), Fixed2(sum.mean()));
    out += BlockRow(StrCat("Median ", s.label, " (ms):"), Fixed2(sum.median()));
    const std::vector<double>& ps = c.metric_percentiles.empty() ? s.default_percentiles : c.metric_percentiles;
    for (double p : ps) out += BlockRow(StrCat(PercentileName(p), " ", s.label, " (ms):"), Fixed2(sum.Percentile(p)));
    if (s.max) out += BlockRow(StrCat("Max ", s.label, " (ms):"), Fixed2(sum.max()));
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string FormatFailures(const BenchmarkMetrics& m) {
  if (m.failed == 0) return "";
  std::string out = BlockRow("Failed requests:", std::to_string(m.failed));
  for (const auto& [reason, count] : m.failure_reasons) {
    std::string shown = reason.size() > 200 ? reason.substr(0, 200) + "..." : reason;
    out += StrCat("  ", count, " x ", shown, "\n");
  }
  return out;
}

namespace {

// One metric's keys under `name`: mean, median, std and each percentile.
void SummaryKeys(Json& j, const std::string& name, const Summary& sum, const std::vector<double>& percentiles) {
  j[StrCat("mean_", name, "_ms")] = sum.mean();
  j[StrCat("median_", name, "_ms")] = sum.median();
  j[StrCat("std_", name, "_ms")] = sum.std();
  for (double p : percentiles) j[StrCat(PercentileKey(p), "_", name, "_ms")] = sum.Percentile(p);
}

}  // namespace

Json ResultJson(const ReportConfig& c, const BenchmarkMetrics& m) {
  Json j;
  j["backend"] = c.backend;
  if (std::isinf(c.request_rate)) {
    j["request_rate"] = "inf";
  } else {
    j["request_rate"] = c.request_rate;
  }
  j["max_concurrency"] = c.max_concurrency ? Json(*c.max_concurrency) : Json(nullptr);
  j["duration"] = c.duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_input_text_tokens"] = m.total_input;
  j["total_input_vision_tokens"] = 0;  // text prompts only
  j["total_output_tokens"] = m.total_output;
  j["total_output_tokens_retokenized"] = m.total_output_retokenized;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = c.goodput ? Json(m.request_goodput) : Json(nullptr);
  j["input_throughput"] = m.input_throughput;
  j["output_throughput"] = m.output_throughput;
  j["total_throughput"] = m.total_throughput;
  j["total_token_throughput"] = m.total_throughput;  // vLLM's name of the same number
  for (const Section& s : Sections()) {
    const Summary& sum = m.*(s.summary);
    std::vector<double> sglang = s.default_percentiles;  // sglang's fixed keys
    std::vector<double> vllm = {99};                     // vLLM's default --metric-percentiles
    for (double p : c.metric_percentiles) {
      sglang.push_back(p);
      vllm.push_back(p);
    }
    SummaryKeys(j, s.json, sum, sglang);
    SummaryKeys(j, s.vllm, sum, vllm);
  }
  j["max_itl_ms"] = m.itl_ms.max();
  j["concurrency"] = m.concurrency;
  j["accept_length"] = c.accept_length ? Json(*c.accept_length) : Json(nullptr);
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  return j;
}

}  // namespace fission::serving_bench
