// `fission catalog expand|list`: the expanded matrix of a selection, as a table or JSON, with cell
// counts per model and per preset. `expand` lists every cell; `list` one row per model.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "catalog/expansion.h"
#include "catalog/selection.h"

namespace fission::catalog {

struct Listing {
  std::vector<const ModelEntry*> models;
  std::vector<Cell> cells;
  std::vector<std::pair<std::string, size_t>> per_model;   // prefix -> cells, in catalog order
  std::vector<std::pair<std::string, size_t>> per_preset;  // every known preset -> cells it would select
};

// Expands `selection` over `grid` (suite defaults when null). Preset counts are taken over the whole
// catalog (within the selection's suite when one is set) with the same grid.
Listing BuildListing(const Catalog& catalog, const Selection& selection, const std::vector<Workload>* grid);

Json ListingJson(const Catalog& catalog, const Listing& listing, bool with_cells);
std::string ListingTable(const Catalog& catalog, const Listing& listing, bool with_cells);

}  // namespace fission::catalog
