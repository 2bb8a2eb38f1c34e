// Expansion of catalog entries into benchmark cells: one (model, isl, osl, concurrency, ratio) each,
// with the server arguments, environment, prompt counts and result name that cell runs with.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace fission::catalog {

// Parses --param-lists: "isl,osl,conc,ratio;isl,osl,conc,ratio;...". Empty items between ';' are
// skipped. Lengths and concurrency are positive integers, ratio a number in (0, 1].
std::vector<Workload> ParseParamLists(const std::string& text);

// The suite default grids:
//   OOB:  1024x1024 and 8192x1024 at concurrency 4, 8, 16, 32, 64; ratio 0.8.
//   Mesh: 8192x1 at 2, 4, ..., 2048 and 1x1024 at 2, 4, ..., 256, 1024, 2048, 4096; ratio 1.
std::vector<Workload> DefaultGrid(Suite suite);

// The shortest decimal that reads back as `ratio` ("0.8", "1").
std::string FormatRatio(double ratio);

// A catalog's "workloads" (errors name `where`). A grid is a --param-lists string, or a list whose
// items are such strings or objects {"isl", "osl", "concurrency": N or [N, ...], "ratio" (default
// 1)}. The value is one grid for every suite, or an object of grids keyed by workload label
// ("SGLang-OOB", "SGLang-Mesh").
std::map<Suite, std::vector<Workload>> ParseCatalogGrids(const Json& value, const std::string& where);

// The grid each entry runs: --param-lists when given, else the catalog's grid for the entry's
// suite, else the suite's default grid.
struct Grids {
  const std::vector<Workload>* flag = nullptr;                       // --param-lists
  const std::map<Suite, std::vector<Workload>>* catalog = nullptr;  // Catalog::grids
  const std::vector<Workload>& For(Suite suite) const;
  // "--param-lists", "the catalog's workloads" or "the oob default grid", for messages.
  std::string Source(Suite suite) const;
};
Grids GridsFor(const Catalog& catalog, const std::vector<Workload>* flag);

struct Cell {
  const ModelEntry* model = nullptr;
  Workload workload;
  std::string name;          // {prefix}-{isl}-{osl}-{conc}-{ratio}
  std::string server_args;   // [--tensor-parallel-size N] extra_args case_extra_args_by_pair[pair]
  std::vector<EnvVar> env;   // env_vars + case_env_vars_by_pair[pair]
  std::int64_t num_prompts = 0;
  std::int64_t num_warmups = 0;
  // Whether `fission serve`'s own flag checks saw this cell's server arguments, and their verdict
  // ("" when accepted): serve_check.h.
  bool serve_checked = false;
  std::string serve_refusal;
};

std::string CellName(const std::string& prefix, const Workload& w);

// Prompts and warm-ups per cell: 10x and 2x the concurrency; 3x and 1x for Mesh entries whose dp_size
// and ep_size are both above 1.
std::int64_t PromptMultiplier(const ModelEntry& m);
std::int64_t WarmupMultiplier(const ModelEntry& m);

// Expands one entry over `grid` (the entry's suite default when null): cross product in grid order,
// duplicates of (isl, osl, conc, ratio) dropped (first kept), then the pair and concurrency filters.
std::vector<Cell> ExpandModel(const ModelEntry& model, const std::vector<Workload>* grid);
std::vector<Cell> ExpandModels(const std::vector<const ModelEntry*>& models, const std::vector<Workload>* grid);
std::vector<Cell> ExpandModels(const std::vector<const ModelEntry*>& models, const Grids& grids);

// Why `model` gets no cell from `grid` (its pair or concurrency filters), for the warning.
std::string NoCellReason(const ModelEntry& model, const std::vector<Workload>& grid);

}  // namespace fission::catalog
