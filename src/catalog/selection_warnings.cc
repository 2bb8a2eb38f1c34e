#include "catalog/selection_warnings.h"

#include <algorithm>

namespace fission::catalog {

namespace {

size_t CellsOf(const ModelEntry* m, const std::vector<Cell>& cells) {
  return static_cast<size_t>(std::count_if(cells.begin(), cells.end(), [&](const Cell& c) { return c.model == m; }));
}

std::string SuiteText(const Selection& s) { return s.suite ? StrCat(" in suite ", SuiteName(*s.suite)) : ""; }

}  // namespace

std::vector<std::string> SelectionWarnings(const Catalog& catalog, const Selection& selection,
                                           const std::vector<const ModelEntry*>& selected,
                                           const std::vector<Cell>& cells, const Grids& grids) {
  std::vector<std::string> out;
  for (const std::string& preset : selection.presets) {
    std::vector<const ModelEntry*> matched;
    for (const ModelEntry* m : selected) {
      if (PresetMatches(preset, *m)) matched.push_back(m);
    }
    if (matched.empty()) {
      out.push_back(StrCat(catalog.source, ": preset '", preset, "' selects no entry", SuiteText(selection)));
      continue;
    }
    size_t n = 0;
    for (const ModelEntry* m : matched) n += CellsOf(m, cells);
    if (n == 0) {
      out.push_back(StrCat(catalog.source, ": preset '", preset, "' selects ", matched.size(),
                           " entries but no cell (their filters keep none of the grid)"));
    }
  }
  for (const ModelEntry* m : selected) {
    if (CellsOf(m, cells) > 0) continue;
    out.push_back(StrCat(catalog.source, ": ", m->Where(), " gets no cell from ", grids.Source(m->suite), ": ",
                         NoCellReason(*m, grids.For(m->suite))));
  }
  return out;
}

}  // namespace fission::catalog
