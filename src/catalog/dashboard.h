// The HTML dashboard of a catalog run: one self-contained page (no network, no external files) with an
// inline SVG chart of throughput, TTFT, TPOT and ITL against concurrency (log2 axis) for every entry and
// workload, the baseline drawn dashed when given and regressed points marked.
//
// Each chart is <svg class="chart" id="chart-{prefix}-{isl}x{osl}-r{ratio}-{metric}"> with
// data-metric, data-points and data-regressions attributes; the current run is a polyline of class
// "series current" with circles of class "point current", the baseline "series baseline", regressed
// points "point regression". A small inline script checks after load that every chart has a laid-out
// box and drawn points and records the count in <body data-charts-rendered="N" data-charts-total="M">.
#pragma once

#include <string>

#include "catalog/report.h"

namespace fission::catalog {

std::string RenderDashboard(const RunData& run, const RunData* baseline);

// "chart-" + the given parts with anything outside [A-Za-z0-9_-] replaced by '_'.
std::string ChartId(const std::string& prefix, const CellOutcome& workload, const std::string& metric);

std::string HtmlEscape(const std::string& s);

}  // namespace fission::catalog
