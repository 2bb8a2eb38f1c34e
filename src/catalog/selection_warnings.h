// What a selection leaves out, said before anything runs: a preset that selects no entry (or
// entries without cells), and a selected entry whose filters keep none of its grid's workloads
// (a PCP entry whose only pair is 61440x600 against the default grid, for example).
#pragma once

#include <string>
#include <vector>

#include "catalog/expansion.h"
#include "catalog/selection.h"

namespace fission::catalog {

// One message per preset or entry that contributes no cell, naming it and why.
std::vector<std::string> SelectionWarnings(const Catalog& catalog, const Selection& selection,
                                           const std::vector<const ModelEntry*>& selected,
                                           const std::vector<Cell>& cells, const Grids& grids);

}  // namespace fission::catalog
