// Expansion of catalog entries into benchmark cells: one (model, isl, osl, concurrency, ratio) each,
// with the server arguments, environment, prompt counts and result name that cell runs with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"

namespace fission::catalog {

struct Workload {
  std::int64_t isl = 0;
  std::int64_t osl = 0;
  std::int64_t concurrency = 0;
  double ratio = 1.0;
  IoPair Pair() const { return {isl, osl}; }
  bool operator==(const Workload&) const = default;
};

// Parses --param-lists: "isl,osl,conc,ratio;isl,osl,conc,ratio;...". Empty items between ';' are
// skipped. Lengths and concurrency are positive integers, ratio a number in (0, 1].
std::vector<Workload> ParseParamLists(const std::string& text);

// The suite default grids:
//   OOB:  1024x1024 and 8192x1024 at concurrency 4, 8, 16, 32, 64; ratio 0.8.
//   Mesh: 8192x1 at 2, 4, ..., 2048 and 1x1024 at 2, 4, ..., 256, 1024, 2048, 4096; ratio 1.
std::vector<Workload> DefaultGrid(Suite suite);

// The shortest decimal that reads back as `ratio` ("0.8", "1").
std::string FormatRatio(double ratio);

struct Cell {
  const ModelEntry* model = nullptr;
  Workload workload;
  std::string name;          // {prefix}-{isl}-{osl}-{conc}-{ratio}
  std::string server_args;   // [--tensor-parallel-size N] extra_args case_extra_args_by_pair[pair]
  std::vector<EnvVar> env;   // env_vars + case_env_vars_by_pair[pair]
  std::int64_t num_prompts = 0;
  std::int64_t num_warmups = 0;
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

}  // namespace fission::catalog
