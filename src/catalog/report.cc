#include "catalog/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "base/mapped_file.h"
#include "catalog/expansion.h"
#include "catalog/runner.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;

std::string Str(const Json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

CellOutcome FromManifest(const Json& c, const fs::path& dir, const std::string& where) {
  CellOutcome o;
  o.name = GetString(c, "name", where);
  o.prefix = GetString(c, "prefix", where);
  o.display = Str(c, "display");
  o.dashboard_model = Str(c, "dashboard_model");
  o.workload_label = Str(c, "workload_label");
  o.isl = GetInt(c, "isl", where);
  o.osl = GetInt(c, "osl", where);
  o.concurrency = GetInt(c, "concurrency", where);
  o.ratio = GetDouble(c, "ratio", where);
  o.status = GetString(c, "status", where);
  o.error = Str(c, "error");
  o.log_tail = Str(c, "log_tail");
  if (o.status == "ok") {
    try {
      o.result = ReadBenchResult((dir / GetString(c, "result_file", where)).string());
      if (!o.result.is_object()) Fail("not a JSON object");
    } catch (const Error& e) {
      o.status = "failed";
      o.error = StrCat("result unreadable: ", e.what());
      o.result = Json();
    }
  }
  return o;
}

// A result without a manifest: the workload comes from the bench result's own fields.
CellOutcome FromResult(const fs::path& file) {
  CellOutcome o;
  const std::string where = file.string();
  o.result = ReadBenchResult(where);
  o.name = file.stem().string();
  o.isl = GetInt(o.result, "random_input_len", where);
  o.osl = GetInt(o.result, "random_output_len", where);
  o.concurrency = GetInt(o.result, "max_concurrency", where);
  o.ratio = GetDouble(o.result, "random_range_ratio", where, 1.0);
  // {prefix}-{isl}-{osl}-{conc}-{ratio}: the prefix is what precedes the workload suffix.
  const std::string suffix = StrCat("-", o.isl, "-", o.osl, "-", o.concurrency, "-");
  const size_t at = o.name.rfind(suffix);
  o.prefix = at == std::string::npos ? o.name : o.name.substr(0, at);
  o.display = o.dashboard_model = o.prefix;
  o.status = GetInt(o.result, "completed", where, 0) > 0 ? "ok" : "failed";
  if (o.status != "ok") o.error = "no request completed";
  return o;
}

std::string Percent(double change) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", change * 100.0);
  return buf;
}

std::string Cellify(std::string s) {
  for (char& c : s) {
    if (c == '|' || c == '\n') c = ' ';
  }
  return s;
}

}  // namespace

const std::vector<MetricSpec>& ReportMetrics() {
  static const std::vector<MetricSpec> kMetrics = {
      {"throughput", "output_throughput", "Output throughput", "tok/s", true, 0.05},
      {"ttft", "median_ttft_ms", "TTFT (median)", "ms", false, 0.10},
      {"tpot", "median_tpot_ms", "TPOT (median)", "ms", false, 0.10},
      {"itl", "median_itl_ms", "ITL (median)", "ms", false, 0.10},
  };
  return kMetrics;
}

std::optional<double> CellOutcome::Metric(const std::string& key) const {
  if (status != "ok" || !result.is_object()) return std::nullopt;
  auto it = result.find(key);
  if (it == result.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::string CellOutcome::Workload() const { return StrCat(isl, "x", osl, ", ratio ", FormatRatio(ratio)); }

const CellOutcome* RunData::Find(const std::string& name) const {
  for (const CellOutcome& c : cells) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

RunData LoadRun(const std::string& dir) {
  RunData run;
  run.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) Fail("run directory '", dir, "' does not exist");
  const fs::path manifest_path = fs::path(dir) / "manifest.json";
  if (fs::exists(manifest_path)) {
    const std::string where = manifest_path.string();
    const Json manifest = ReadJsonFile(where);
    run.created = GetString(manifest, "created", where, "");
    const Json& cells = RequireField(manifest, "cells", where);
    if (!cells.is_array()) Fail(where, ": 'cells' must be a list");
    for (size_t i = 0; i < cells.size(); ++i) {
      run.cells.push_back(FromManifest(cells[i], dir, StrCat(where, ": cell ", i)));
    }
    return run;
  }
  fs::path results = fs::path(dir) / "results";
  if (!fs::is_directory(results, ec)) results = dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(results)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) run.cells.push_back(FromResult(f));
  if (run.cells.empty()) Fail("run directory '", dir, "' has no manifest.json and no result files");
  return run;
}

std::vector<Regression> FindRegressions(const RunData& run, const RunData& baseline) {
  std::vector<Regression> out;
  for (const CellOutcome& c : run.cells) {
    const CellOutcome* b = baseline.Find(c.name);
    if (!b) continue;
    for (const MetricSpec& m : ReportMetrics()) {
      const std::optional<double> cur = c.Metric(m.key), base = b->Metric(m.key);
      if (!cur || !base || *base <= 0) continue;
      const double change = (*cur - *base) / *base;
      const bool regressed = m.higher_is_better ? change < -m.threshold : change > m.threshold;
      if (regressed) out.push_back({c.name, m.id, *base, *cur, change});
    }
  }
  return out;
}

std::string FormatNumber(std::optional<double> v, int decimals) {
  if (!v) return "-";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, *v);
  return buf;
}

std::string RenderMarkdown(const RunData& run, const RunData* baseline) {
  std::ostringstream md;
  const std::vector<Regression> regressions = baseline ? FindRegressions(run, *baseline) : std::vector<Regression>{};
  size_t ok = 0;
  for (const CellOutcome& c : run.cells) ok += c.status == "ok";
  md << "# Benchmark report\n\n";
  md << "- Run: `" << run.dir << "`" << (run.created.empty() ? "" : " (" + run.created + ")") << "\n";
  if (baseline) md << "- Baseline: `" << baseline->dir << "`\n";
  md << "- Cells: " << run.cells.size() << " (" << ok << " ok, " << run.cells.size() - ok << " not ok)\n";
  if (baseline) {
    md << "- Regressions (throughput down > 5%, latency up > 10%): " << regressions.size() << "\n";
  }
  md << "\n";

  // Entries in order of first appearance; cells of an entry by workload, then concurrency.
  std::vector<std::string> prefixes;
  for (const CellOutcome& c : run.cells) {
    if (std::find(prefixes.begin(), prefixes.end(), c.prefix) == prefixes.end()) prefixes.push_back(c.prefix);
  }
  for (const std::string& prefix : prefixes) {
    std::vector<const CellOutcome*> cells;
    for (const CellOutcome& c : run.cells) {
      if (c.prefix == prefix) cells.push_back(&c);
    }
    std::stable_sort(cells.begin(), cells.end(), [](const CellOutcome* a, const CellOutcome* b) {
      return std::tie(a->isl, a->osl, a->ratio, a->concurrency) < std::tie(b->isl, b->osl, b->ratio, b->concurrency);
    });
    const CellOutcome& head = *cells.front();
    md << "## " << Cellify(head.display) << " (`" << prefix << "`)"
       << (head.workload_label.empty() ? "" : " — " + head.workload_label) << "\n\n";
    md << "| ISL | OSL | Ratio | Conc | Status | Req/s | Output tok/s | TTFT p50 (ms) | TPOT p50 (ms) | ITL p50 (ms) |";
    if (baseline) md << " vs baseline |";
    md << "\n|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|" << (baseline ? "---|" : "") << "\n";
    for (const CellOutcome* c : cells) {
      md << "| " << c->isl << " | " << c->osl << " | " << FormatRatio(c->ratio) << " | " << c->concurrency << " | "
         << c->status << " | " << FormatNumber(c->Metric("request_throughput"), 2) << " | "
         << FormatNumber(c->Metric("output_throughput"), 1) << " | " << FormatNumber(c->Metric("median_ttft_ms"), 2)
         << " | " << FormatNumber(c->Metric("median_tpot_ms"), 2) << " | " << FormatNumber(c->Metric("median_itl_ms"), 2)
         << " |";
      if (baseline) {
        const CellOutcome* b = baseline->Find(c->name);
        std::string note;
        if (!b) {
          note = "no baseline";
        } else {
          for (const MetricSpec& m : ReportMetrics()) {
            const auto cur = c->Metric(m.key), base = b->Metric(m.key);
            if (!cur || !base || *base <= 0) continue;
            const double change = (*cur - *base) / *base;
            const bool regressed = m.higher_is_better ? change < -m.threshold : change > m.threshold;
            note += (note.empty() ? "" : ", ") + std::string(m.id) + " " + Percent(change) +
                    (regressed ? " **REGRESSION**" : "");
          }
          if (note.empty()) note = "-";
        }
        md << " " << note << " |";
      }
      md << "\n";
    }
    md << "\n";
  }

  if (!regressions.empty()) {
    md << "## Regressions\n\n| Cell | Metric | Baseline | Current | Change |\n|---|---|---:|---:|---:|\n";
    for (const Regression& r : regressions) {
      md << "| " << r.cell << " | " << r.metric << " | " << FormatNumber(r.baseline, 2) << " | "
         << FormatNumber(r.current, 2) << " | " << Percent(r.change) << " |\n";
    }
    md << "\n";
  }
  bool any_failed = false;
  for (const CellOutcome& c : run.cells) {
    if (c.status == "ok") continue;
    if (!any_failed) md << "## Failed cells\n\n";
    any_failed = true;
    md << "### " << c.name << " (" << c.status << ")\n\n" << (c.error.empty() ? c.status : c.error) << "\n\n";
    if (!c.log_tail.empty()) {
      // A fence longer than any run of backticks in the log.
      size_t longest = 0, run = 0;
      for (char ch : c.log_tail) {
        run = ch == '`' ? run + 1 : 0;
        longest = std::max(longest, run);
      }
      const std::string fence(std::max<size_t>(3, longest + 1), '`');
      md << fence << "\n" << c.log_tail << (c.log_tail.back() == '\n' ? "" : "\n") << fence << "\n\n";
    }
  }
  return md.str();
}

}  // namespace fission::catalog
