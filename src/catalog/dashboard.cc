#include "catalog/dashboard.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "catalog/expansion.h"

namespace fission::catalog {
namespace {

constexpr double kWidth = 380, kHeight = 240;
constexpr double kLeft = 60, kRight = 16, kTop = 30, kBottom = 42;

struct Point {
  std::int64_t concurrency;
  double value;
  bool regression = false;
};

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string TickLabel(double v) {
  char buf[32];
  if (v != 0 && std::fabs(v) < 10 && std::fabs(v - std::round(v)) > 1e-9) {
    std::snprintf(buf, sizeof(buf), "%.2g", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  }
  return buf;
}

// A round step so that about five ticks cover [0, max].
double NiceStep(double max) {
  const double raw = max / 5.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= f * mag) return f * mag;
  }
  return 10 * mag;
}

using WorkloadKey = std::tuple<std::int64_t, std::int64_t, double>;

WorkloadKey KeyOf(const CellOutcome& c) { return {c.isl, c.osl, c.ratio}; }

std::vector<Point> Series(const std::vector<const CellOutcome*>& cells, const MetricSpec& m,
                          const std::set<std::string>& regressed) {
  std::vector<Point> out;
  for (const CellOutcome* c : cells) {
    if (auto v = c->Metric(m.key)) out.push_back({c->concurrency, *v, regressed.count(c->name) > 0});
  }
  std::sort(out.begin(), out.end(), [](const Point& a, const Point& b) { return a.concurrency < b.concurrency; });
  return out;
}

std::string RenderChart(const std::string& id, const std::string& title, const MetricSpec& m,
                        const std::vector<Point>& current, const std::vector<Point>& baseline,
                        const std::vector<std::int64_t>& concurrencies) {
  std::ostringstream s;
  size_t regressions = 0;
  for (const Point& p : current) regressions += p.regression;
  s << "<svg class=\"chart\" id=\"" << id << "\" data-metric=\"" << m.id << "\" data-points=\"" << current.size()
    << "\" data-regressions=\"" << regressions << "\" width=\"" << kWidth
    << "\" height=\"" << kHeight << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" role=\"img\">\n";
  s << "<title>" << HtmlEscape(title) << "</title>\n";
  s << "<text class=\"chart-title\" x=\"" << kWidth / 2 << "\" y=\"18\" text-anchor=\"middle\">" << HtmlEscape(m.label)
    << " (" << m.unit << ")</text>\n";

  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  double lo = 0, hi = 0;
  if (!concurrencies.empty()) {
    lo = std::log2(static_cast<double>(concurrencies.front()));
    hi = std::log2(static_cast<double>(concurrencies.back()));
  }
  auto x_of = [&](std::int64_t c) {
    if (hi <= lo) return kLeft + plot_w / 2;
    return kLeft + (std::log2(static_cast<double>(c)) - lo) / (hi - lo) * plot_w;
  };
  double max_v = 0;
  for (const auto* series : {&current, &baseline}) {
    for (const Point& p : *series) max_v = std::max(max_v, p.value);
  }
  const double step = max_v > 0 ? NiceStep(max_v * 1.05) : 0.2;
  const double y_max = step * std::max(1.0, std::ceil(max_v * 1.05 / step));
  auto y_of = [&](double v) { return kTop + plot_h - v / y_max * plot_h; };

  // Grid, axes and ticks.
  for (double v = 0; v <= y_max + step * 1e-6; v += step) {
    s << "<line class=\"grid\" x1=\"" << kLeft << "\" x2=\"" << kLeft + plot_w << "\" y1=\"" << Num(y_of(v))
      << "\" y2=\"" << Num(y_of(v)) << "\"/><text class=\"tick\" x=\"" << kLeft - 6 << "\" y=\"" << Num(y_of(v) + 4)
      << "\" text-anchor=\"end\">" << TickLabel(v) << "</text>\n";
  }
  for (std::int64_t c : concurrencies) {
    s << "<line class=\"grid\" x1=\"" << Num(x_of(c)) << "\" x2=\"" << Num(x_of(c)) << "\" y1=\"" << kTop
      << "\" y2=\"" << kTop + plot_h << "\"/><text class=\"tick\" x=\"" << Num(x_of(c)) << "\" y=\""
      << kTop + plot_h + 14 << "\" text-anchor=\"middle\">" << c << "</text>\n";
  }
  s << "<line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft << "\" y1=\"" << kTop << "\" y2=\""
    << kTop + plot_h << "\"/><line class=\"axis\" x1=\"" << kLeft << "\" x2=\"" << kLeft + plot_w << "\" y1=\""
    << kTop + plot_h << "\" y2=\"" << kTop + plot_h << "\"/>\n";
  s << "<text class=\"axis-label\" x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 6
    << "\" text-anchor=\"middle\">concurrency</text>\n";

  auto polyline = [&](const std::vector<Point>& pts, const char* cls) {
    if (pts.empty()) return;
    s << "<polyline class=\"series " << cls << "\" fill=\"none\" points=\"";
    for (size_t i = 0; i < pts.size(); ++i) s << (i ? " " : "") << Num(x_of(pts[i].concurrency)) << "," << Num(y_of(pts[i].value));
    s << "\"/>\n";
  };
  polyline(baseline, "baseline");
  polyline(current, "current");
  for (const Point& p : baseline) {
    s << "<circle class=\"point baseline\" r=\"2.5\" cx=\"" << Num(x_of(p.concurrency)) << "\" cy=\""
      << Num(y_of(p.value)) << "\"><title>baseline, concurrency " << p.concurrency << ": " << FormatNumber(p.value, 2)
      << " " << m.unit << "</title></circle>\n";
  }
  for (const Point& p : current) {
    s << "<circle class=\"point current" << (p.regression ? " regression" : "") << "\" r=\""
      << (p.regression ? "5" : "3.5") << "\" cx=\"" << Num(x_of(p.concurrency)) << "\" cy=\"" << Num(y_of(p.value))
      << "\"><title>concurrency " << p.concurrency << ": " << FormatNumber(p.value, 2) << " " << m.unit
      << (p.regression ? " (regression)" : "") << "</title></circle>\n";
  }
  if (current.empty()) {
    s << "<text class=\"no-data\" x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kTop + plot_h / 2
      << "\" text-anchor=\"middle\">no data</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

constexpr const char* kStyle = R"(
body { font-family: sans-serif; margin: 24px; color: #1d2330; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ccd; }
h3 { font-size: 14px; color: #445; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { border: 1px solid #dde; background: #fbfcff; }
.chart-title { font-size: 13px; font-weight: bold; fill: #223; }
.tick { font-size: 10px; fill: #556; } .axis-label { font-size: 11px; fill: #556; }
.grid { stroke: #e4e7ef; stroke-width: 1; } .axis { stroke: #556; stroke-width: 1; }
.series.current { stroke: #1f6feb; stroke-width: 2; } .series.baseline { stroke: #8b949e; stroke-width: 1.5; stroke-dasharray: 5 4; }
.point.current { fill: #1f6feb; } .point.baseline { fill: #8b949e; } .point.regression { fill: #d1242f; }
.no-data { font-size: 13px; fill: #999; } .legend { font-size: 12px; color: #556; }
table { border-collapse: collapse; font-size: 12px; } td, th { border: 1px solid #dde; padding: 3px 8px; text-align: right; }
td.l, th.l { text-align: left; } .bad { color: #d1242f; font-weight: bold; } pre { font-size: 11px; background: #f4f5f8; padding: 8px; overflow-x: auto; }
)";

constexpr const char* kScript = R"(
window.addEventListener('load', function () {
  var charts = document.querySelectorAll('svg.chart');
  var rendered = 0;
  charts.forEach(function (svg) {
    var box = svg.getBoundingClientRect();
    var expected = parseInt(svg.getAttribute('data-points'), 10);
    var drawn = svg.querySelectorAll('circle.point.current').length;
    var line = svg.querySelector('polyline.series.current');
    var ok = box.width > 0 && box.height > 0 && drawn === expected &&
             (expected < 2 || (line !== null && line.getBBox().width > 0));
    svg.setAttribute('data-rendered', ok ? 'true' : 'false');
    if (ok) rendered++;
  });
  document.body.setAttribute('data-charts-rendered', String(rendered));
  document.body.setAttribute('data-charts-total', String(charts.length));
  var status = document.getElementById('render-status');
  if (status) status.textContent = rendered + ' of ' + charts.length + ' charts rendered';
});
)";

}  // namespace

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string ChartId(const std::string& prefix, const CellOutcome& w, const std::string& metric) {
  std::string id = StrCat("chart-", prefix, "-", w.isl, "x", w.osl, "-r", FormatRatio(w.ratio), "-", metric);
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return id;
}

std::string RenderDashboard(const RunData& run, const RunData* baseline) {
  const std::vector<Regression> regressions = baseline ? FindRegressions(run, *baseline) : std::vector<Regression>{};
  std::map<std::string, std::set<std::string>> regressed;  // metric id -> cell names
  for (const Regression& r : regressions) regressed[r.metric].insert(r.cell);
  size_t ok = 0;
  for (const CellOutcome& c : run.cells) ok += c.status == "ok";

  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Fission benchmark dashboard</title>\n"
    << "<style>" << kStyle << "</style>\n</head>\n<body>\n<h1>Fission benchmark dashboard</h1>\n";
  h << "<p id=\"summary\">Run <code>" << HtmlEscape(run.dir) << "</code>" << (run.created.empty() ? "" : " (" + HtmlEscape(run.created) + ")")
    << ": " << run.cells.size() << " cells, " << ok << " ok, " << run.cells.size() - ok << " not ok.";
  if (baseline) {
    h << " Baseline <code>" << HtmlEscape(baseline->dir) << "</code>: <span class=\""
      << (regressions.empty() ? "" : "bad") << "\" id=\"regression-count\">" << regressions.size()
      << " regressions</span> (throughput down &gt; 5%, latency up &gt; 10%).";
  }
  h << " <span id=\"render-status\"></span></p>\n";
  h << "<p class=\"legend\">Solid line: this run" << (baseline ? "; dashed line: baseline; red point: regression" : "")
    << ". Concurrency on a log<sub>2</sub> axis; latencies are medians.</p>\n";

  std::vector<std::string> prefixes;
  for (const CellOutcome& c : run.cells) {
    if (std::find(prefixes.begin(), prefixes.end(), c.prefix) == prefixes.end()) prefixes.push_back(c.prefix);
  }
  for (const std::string& prefix : prefixes) {
    std::map<WorkloadKey, std::vector<const CellOutcome*>> by_workload;
    const CellOutcome* head = nullptr;
    for (const CellOutcome& c : run.cells) {
      if (c.prefix != prefix) continue;
      if (!head) head = &c;
      by_workload[KeyOf(c)].push_back(&c);
    }
    h << "<section class=\"model\" id=\"model-" << HtmlEscape(prefix) << "\">\n<h2>" << HtmlEscape(head->display)
      << " <small>(" << HtmlEscape(prefix) << (head->workload_label.empty() ? "" : ", " + HtmlEscape(head->workload_label))
      << ")</small></h2>\n";
    for (const auto& [key, cells] : by_workload) {
      std::vector<const CellOutcome*> base_cells;
      if (baseline) {
        for (const CellOutcome& b : baseline->cells) {
          if (b.prefix == prefix && KeyOf(b) == key) base_cells.push_back(&b);
        }
      }
      std::set<std::int64_t> concs;
      for (const CellOutcome* c : cells) concs.insert(c->concurrency);
      for (const CellOutcome* c : base_cells) concs.insert(c->concurrency);
      const std::vector<std::int64_t> axis(concs.begin(), concs.end());
      const CellOutcome& w = *cells.front();
      h << "<h3>" << HtmlEscape(w.Workload()) << "</h3>\n<div class=\"charts\">\n";
      for (const MetricSpec& m : ReportMetrics()) {
        const std::vector<Point> current = Series(cells, m, regressed[m.id]);
        const std::vector<Point> base = Series(base_cells, m, {});
        h << RenderChart(ChartId(prefix, w, m.id), StrCat(head->display, " ", w.Workload(), ": ", m.label), m, current,
                         base, axis);
      }
      h << "</div>\n";
    }
    h << "</section>\n";
  }

  if (!regressions.empty()) {
    h << "<h2>Regressions</h2>\n<table id=\"regressions\"><tr><th class=\"l\">Cell</th><th class=\"l\">Metric</th>"
      << "<th>Baseline</th><th>Current</th><th>Change</th></tr>\n";
    for (const Regression& r : regressions) {
      char change[32];
      std::snprintf(change, sizeof(change), "%+.1f%%", r.change * 100);
      h << "<tr><td class=\"l\">" << HtmlEscape(r.cell) << "</td><td class=\"l\">" << r.metric << "</td><td>"
        << FormatNumber(r.baseline, 2) << "</td><td>" << FormatNumber(r.current, 2) << "</td><td class=\"bad\">"
        << change << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  bool any_failed = false;
  for (const CellOutcome& c : run.cells) {
    if (c.status == "ok") continue;
    if (!any_failed) h << "<h2>Failed cells</h2>\n";
    any_failed = true;
    h << "<details class=\"failed-cell\"><summary><span class=\"bad\">" << HtmlEscape(c.name) << "</span>: "
      << HtmlEscape(c.error.empty() ? c.status : c.error) << "</summary><pre>" << HtmlEscape(c.log_tail)
      << "</pre></details>\n";
  }
  h << "<script>" << kScript << "</script>\n</body>\n</html>\n";
  return h.str();
}

}  // namespace fission::catalog
