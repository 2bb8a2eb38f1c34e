// `fission catalog expand|list`: the expanded matrix of a selection, as a table or JSON, with cell
// counts per model and per preset, the cells `fission serve` would refuse and why, and warnings
// for presets and entries that select nothing. `expand` lists every cell; `list` one row per model.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "catalog/expansion.h"
#include "catalog/selection.h"
#include "catalog/serve_check.h"

namespace fission::catalog {

struct Listing {
  std::vector<const ModelEntry*> models;
  std::vector<Cell> cells;
  std::vector<std::pair<std::string, size_t>> per_model;   // prefix -> cells, in catalog order
  std::vector<std::pair<std::string, size_t>> per_preset;  // every known preset -> cells it would select
  std::vector<std::string> warnings;  // the selection's (selection_warnings.h)
};

// Expands `selection` over `grid` (--param-lists; else the catalog's or the suite's grid). Preset
// counts are taken over the whole catalog (within the selection's suite when one is set) with the
// same grids. Each cell's default server command is checked with `check` when one is given.
Listing BuildListing(const Catalog& catalog, const Selection& selection, const std::vector<Workload>* grid,
                     const ServeFlagCheck& check = nullptr);

Json ListingJson(const Catalog& catalog, const Listing& listing, bool with_cells);
std::string ListingTable(const Catalog& catalog, const Listing& listing, bool with_cells);

}  // namespace fission::catalog
