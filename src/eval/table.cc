#include "eval/table.h"

#include <algorithm>
#include <cstdio>

namespace fission::eval {

namespace {

// Display width: code points (the arrows and ± are one column wide).
size_t Width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

std::string Pad(const std::string& s, size_t width, char align) {
  const size_t w = Width(s);
  if (w >= width) return s;
  const size_t pad = width - w;
  if (align == '<') return s + std::string(pad, ' ');
  if (align == '>') return std::string(pad, ' ') + s;
  return std::string(pad / 2, ' ') + s + std::string(pad - pad / 2, ' ');
}

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, v);
  return buf;
}

// Decimals left in "%.4f" once trailing zeros go.
int SignificantDecimals(double v) {
  std::string s = Fixed(v, 4);
  int d = 4;
  while (d > 0 && s.back() == '0') {
    s.pop_back();
    --d;
  }
  return d;
}

struct Column {
  std::string header;
  std::vector<std::string> cells;
  bool right = false;
};

// A column of numbers: formatted with the column's decimals and right-aligned; a column with a
// non-number in it stays text.
Column NumberColumn(const std::string& header, const std::vector<std::optional<double>>& values, bool as_int) {
  Column c{header, {}, true};
  int decimals = 0;
  for (const auto& v : values) {
    if (!v) {
      c.right = false;
    } else if (!as_int) {
      decimals = std::max(decimals, SignificantDecimals(*v));
    }
  }
  for (const auto& v : values) {
    if (!v) {
      c.cells.push_back("N/A");
    } else if (c.right) {
      c.cells.push_back(Fixed(*v, as_int ? 0 : decimals));
    } else {
      c.cells.push_back(Fixed(*v, 4));
    }
  }
  return c;
}

}  // namespace

std::string FormatResultsTable(const std::vector<TableRow>& rows) {
  Column tasks{"Tasks", {}, false}, filter{"Filter", {}, false}, metric{"Metric", {}, false};
  Column hib{"", {}, false}, pm{"", {}, false};
  std::vector<std::optional<double>> versions, shots, values, errors;
  Column version_text{"Version", {}, true};
  std::string prev;
  for (const TableRow& r : rows) {
    const bool first = r.task != prev;
    prev = r.task;
    tasks.cells.push_back(first ? r.task : "");
    versions.push_back(first ? std::optional<double>(r.version) : std::nullopt);
    filter.cells.push_back(r.filter);
    shots.push_back(r.n_shot);
    metric.cells.push_back(r.metric);
    hib.cells.push_back("↑");
    values.push_back(r.value);
    pm.cells.push_back("±");
    errors.push_back(r.stderr_value);
  }
  // Versions are integers; an empty cell is blank, not "N/A".
  for (const auto& v : versions) version_text.cells.push_back(v ? Fixed(*v, 0) : "");
  std::vector<Column> cols = {tasks, version_text, filter, NumberColumn("n-shot", shots, true), metric, hib,
                              NumberColumn("Value", values, false), pm, NumberColumn("Stderr", errors, false)};
  std::string out;
  std::vector<size_t> widths;
  for (const Column& c : cols) {
    size_t w = std::max<size_t>(3, Width(c.header));
    for (const std::string& cell : c.cells) w = std::max(w, Width(cell));
    widths.push_back(w);
  }
  out += "|";
  for (size_t i = 0; i < cols.size(); ++i) out += Pad(cols[i].header, widths[i], '^') + "|";
  out += "\n|";
  for (size_t i = 0; i < cols.size(); ++i) {
    out += cols[i].right ? std::string(widths[i] - 1, '-') + ":" : std::string(widths[i], '-');
    out += "|";
  }
  out += "\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    out += "|";
    for (size_t i = 0; i < cols.size(); ++i) out += Pad(cols[i].cells[r], widths[i], cols[i].right ? '>' : '<') + "|";
    out += "\n";
  }
  return out;
}

}  // namespace fission::eval
