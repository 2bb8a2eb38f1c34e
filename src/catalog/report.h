// `fission catalog report`: reads a run directory (manifest.json plus results/*.json, see runner.h),
// optionally a baseline run, and renders a markdown table and an HTML dashboard (dashboard.h).
//
// The reported metrics, from the sglang.bench_serving result of each cell:
//   throughput  output_throughput (tok/s)  regression when below the baseline by more than 5%
//   ttft        median_ttft_ms             regression when above the baseline by more than 10%
//   tpot        median_tpot_ms             (same)
//   itl         median_itl_ms              (same)
// Cells are matched with the baseline by name ({prefix}-{isl}-{osl}-{conc}-{ratio}).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::catalog {

struct MetricSpec {
  const char* id;     // "throughput", "ttft", "tpot", "itl"
  const char* key;    // field of the result JSON
  const char* label;  // chart title
  const char* unit;
  bool higher_is_better;
  double threshold;  // relative change beyond which a cell regressed
};
const std::vector<MetricSpec>& ReportMetrics();

struct CellOutcome {
  std::string name;
  std::string prefix;
  std::string display;
  std::string dashboard_model;
  std::string workload_label;
  std::int64_t isl = 0;
  std::int64_t osl = 0;
  std::int64_t concurrency = 0;
  double ratio = 1.0;
  std::string status;  // "ok", "failed", "cancelled", "pending"
  std::string error;
  std::string log_tail;
  Json result;  // the bench result when status is "ok"

  std::optional<double> Metric(const std::string& key) const;
  std::string Workload() const;  // "1024x1024, ratio 0.8"
};

struct RunData {
  std::string dir;
  std::string created;
  std::vector<CellOutcome> cells;
  const CellOutcome* Find(const std::string& name) const;
};

// Loads a run directory. With manifest.json every cell is listed (failed ones included); without it,
// every result JSON under results/ (or the directory itself) is read and its workload taken from the
// result's random_input_len / random_output_len / max_concurrency / random_range_ratio fields.
RunData LoadRun(const std::string& dir);

struct Regression {
  std::string cell;
  std::string metric;  // MetricSpec::id
  double baseline = 0;
  double current = 0;
  double change = 0;  // (current - baseline) / baseline
};
std::vector<Regression> FindRegressions(const RunData& run, const RunData& baseline);

std::string RenderMarkdown(const RunData& run, const RunData* baseline);

// Formats a number with `decimals` digits after the point ("-" for nullopt).
std::string FormatNumber(std::optional<double> v, int decimals);

}  // namespace fission::catalog
