// lm-eval's results table, as its Markdown writer renders it:
//   |Tasks|Version|     Filter     |n-shot|  Metric   |   |Value |   |Stderr|
//   |-----|------:|----------------|-----:|-----------|---|-----:|---|-----:|
//   |gsm8k|      3|flexible-extract|     5|exact_match|↑  |0.9500|±  |0.0060|
// Headers centred; text columns left-aligned, number columns right-aligned; values printed with
// "%.4f" and then, per column, with as many decimals as the longest after trailing zeros go.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fission::eval {

struct TableRow {
  std::string task;
  int version = 0;
  std::string filter;
  int n_shot = 0;
  std::string metric;
  double value = 0;
  std::optional<double> stderr_value;  // nullopt prints "N/A"
};

// Rows of one task are grouped: the task and version print on its first row only.
std::string FormatResultsTable(const std::vector<TableRow>& rows);

}  // namespace fission::eval
