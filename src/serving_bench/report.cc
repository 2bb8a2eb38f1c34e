#include "serving_bench/report.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "base/error.h"

namespace fission::serving_bench {

namespace {

// Python's "{:<40} {:<10}".format(label, value).
std::string Row(const std::string& label, const std::string& value) {
  std::string out = label;
  if (out.size() < 40) out.append(40 - out.size(), ' ');
  out += ' ';
  out += value;
  if (value.size() < 10) out.append(10 - value.size(), ' ');
  return out + "\n";
}

std::string Fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

// Python's "{s:{c}^{n}}": centred, the odd fill character going to the right.
std::string Rule(const std::string& title, char fill) {
  const size_t width = 50;
  if (title.size() >= width) return title + "\n";
  const size_t pad = width - title.size();
  return std::string(pad / 2, fill) + title + std::string(pad - pad / 2, fill) + "\n";
}

struct Section {
  const char* key;      // percentile-metrics name
  const char* title;    // rule text
  const char* label;    // metric name inside labels
  const char* json;     // metric name inside JSON keys
  const Summary BenchmarkMetrics::*summary;
  std::vector<double> default_percentiles;
  bool max;  // "Max ITL"
};

const std::vector<Section>& Sections() {
  static const std::vector<Section> kSections = {
      {"e2el", "End-to-End Latency", "E2E Latency", "e2e_latency", &BenchmarkMetrics::e2e_ms, {90, 99}, false},
      {"ttft", "Time to First Token", "TTFT", "ttft", &BenchmarkMetrics::ttft_ms, {99}, false},
      {"tpot", "Time per Output Token (excl. 1st token)", "TPOT", "tpot", &BenchmarkMetrics::tpot_ms, {99}, false},
      {"itl", "Inter-Token Latency", "ITL", "itl", &BenchmarkMetrics::itl_ms, {95, 99}, true},
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
  std::string out = Rule(" Serving Benchmark Result ", '=');
  out += Row("Backend:", c.backend);
  out += Row("Traffic request rate:", PythonFloat(c.request_rate));
  out += Row("Max request concurrency:", c.max_concurrency ? std::to_string(*c.max_concurrency) : "not set");
  out += Row("Successful requests:", std::to_string(m.completed));
  out += Row("Benchmark duration (s):", Fixed2(c.duration_s));
  out += Row("Total input tokens:", std::to_string(m.total_input));
  out += Row("Total input text tokens:", std::to_string(m.total_input));
  out += Row("Total generated tokens:", std::to_string(m.total_output));
  out += Row("Total generated tokens (retokenized):", std::to_string(m.total_output_retokenized));
  out += Row("Request throughput (req/s):", Fixed2(m.request_throughput));
  if (c.goodput) out += Row("Request goodput (req/s):", Fixed2(m.request_goodput));
  out += Row("Input token throughput (tok/s):", Fixed2(m.input_throughput));
  out += Row("Output token throughput (tok/s):", Fixed2(m.output_throughput));
  out += Row("Peak output token throughput (tok/s):", Fixed2(m.max_output_tokens_per_s));
  out += Row("Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  out += Row("Total token throughput (tok/s):", Fixed2(m.total_throughput));
  out += Row("Concurrency:", Fixed2(m.concurrency));
  if (c.accept_length && *c.accept_length != 0) out += Row("Accept length:", Fixed2(*c.accept_length));
  for (const Section& s : Sections()) {
    if (!Selected(c, s.key)) continue;
    const Summary& sum = m.*(s.summary);
    out += Rule(s.title, '-');
    out += Row(StrCat("Mean ", s.label, " (ms):"), Fixed2(sum.mean()));
    out += Row(StrCat("Median ", s.label, " (ms):"), Fixed2(sum.median()));
    const std::vector<double>& ps = c.metric_percentiles.empty() ? s.default_percentiles : c.metric_percentiles;
    for (double p : ps) out += Row(StrCat(PercentileName(p), " ", s.label, " (ms):"), Fixed2(sum.Percentile(p)));
    if (s.max) out += Row(StrCat("Max ", s.label, " (ms):"), Fixed2(sum.max()));
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string FormatFailures(const BenchmarkMetrics& m) {
  if (m.failed == 0) return "";
  std::string out = Row("Failed requests:", std::to_string(m.failed));
  for (const auto& [reason, count] : m.failure_reasons) {
    std::string shown = reason.size() > 200 ? reason.substr(0, 200) + "..." : reason;
    out += StrCat("  ", count, " x ", shown, "\n");
  }
  return out;
}

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
  j["total_output_tokens"] = m.total_output;
  j["total_output_tokens_retokenized"] = m.total_output_retokenized;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = c.goodput ? Json(m.request_goodput) : Json(nullptr);
  j["input_throughput"] = m.input_throughput;
  j["output_throughput"] = m.output_throughput;
  j["total_throughput"] = m.total_throughput;
  for (const Section& s : Sections()) {
    const Summary& sum = m.*(s.summary);
    j[StrCat("mean_", s.json, "_ms")] = sum.mean();
    j[StrCat("median_", s.json, "_ms")] = sum.median();
    j[StrCat("std_", s.json, "_ms")] = sum.std();
    std::vector<double> ps = s.default_percentiles;  // sglang's fixed keys
    for (double p : c.metric_percentiles) ps.push_back(p);
    for (double p : ps) j[StrCat(PercentileKey(p), "_", s.json, "_ms")] = sum.Percentile(p);
  }
  j["max_itl_ms"] = m.itl_ms.max();
  j["concurrency"] = m.concurrency;
  j["accept_length"] = c.accept_length ? Json(*c.accept_length) : Json(nullptr);
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  return j;
}

}  // namespace fission::serving_bench
