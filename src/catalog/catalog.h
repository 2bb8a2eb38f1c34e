// The benchmark catalog: server configurations (model, parallel layout, flags, environment) that are
// run against a grid of workloads. Two on-disk forms are read:
//   - legacy: a JSON array of model entries;
//   - templates: {"templates": {"extra_args": {NAME: "flags"}, "env_vars": {NAME: "K=V\nK=V"}},
//                 "models": [ ...entries... ], "workloads": GRID}; the optional workload grid is
//                 one grid for every suite or {"SGLang-OOB": GRID, "SGLang-Mesh": GRID}
//                 (expansion.h has the grid's forms).
// Entries reference templates by exact name; an element that names no template is literal text.
// Everything here is resolved at load time, so later stages work on plain strings and lists.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::catalog {

// The benchmark suite an entry belongs to, from its `workload_label`.
enum class Suite { kOob, kMesh };

inline constexpr const char* kOobLabel = "SGLang-OOB";
inline constexpr const char* kMeshLabel = "SGLang-Mesh";

const char* SuiteName(Suite suite);                 // "oob" or "mesh"
Suite ParseSuite(const std::string& text);          // "oob" | "mesh" (case-insensitive), else Error

struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

// Applies `additions` on top of `base`: a name already present keeps its position and takes the new
// value; a new name is appended.
std::vector<EnvVar> MergeEnv(std::vector<EnvVar> base, const std::vector<EnvVar>& additions);

// An input/output length pair, written "ISLxOSL" (for example "8192x1").
struct IoPair {
  std::int64_t isl = 0;
  std::int64_t osl = 0;
  std::string Name() const;
  bool operator==(const IoPair&) const = default;
};
// Parses "ISLxOSL" with positive decimal integers; anything else is an Error naming `where`.
IoPair ParseIoPair(const std::string& text, const std::string& where);

// One workload of a grid: lengths, concurrency and the random range ratio.
struct Workload {
  std::int64_t isl = 0;
  std::int64_t osl = 0;
  std::int64_t concurrency = 0;
  double ratio = 1.0;
  IoPair Pair() const { return {isl, osl}; }
  bool operator==(const Workload&) const = default;
};

struct ModelEntry {
  int index = 0;  // position in the catalog's model list
  std::string prefix;
  std::string display;
  std::string dashboard_model;
  std::string workload_label = kOobLabel;
  Suite suite = Suite::kOob;
  std::string source_path;
  std::string path;  // the model path given to the server; `source_path` when `path` is absent
  std::string runner;
  std::string nightly_group;
  std::string bench_args;
  std::string extra_args;    // resolved: templates substituted, elements joined with spaces
  std::vector<EnvVar> env;   // resolved: templates substituted, lines parsed
  // Mesh entries.
  std::string mesh_spec_mode;
  std::vector<std::string> mesh_presets;
  std::optional<std::int64_t> tp_size;
  std::optional<std::int64_t> dp_size;
  std::optional<std::int64_t> ep_size;
  // Filters, with pairs normalized to IoPair::Name().
  std::optional<std::vector<std::string>> supported_pairs;
  std::vector<std::string> excluded_pairs;
  std::map<std::string, std::vector<std::int64_t>> concurrency_by_pair;
  std::optional<std::vector<std::int64_t>> supported_concurrency;
  // Per-pair additions (resolved like extra_args / env_vars).
  std::map<std::string, std::string> case_extra_args_by_pair;
  std::map<std::string, std::vector<EnvVar>> case_env_by_pair;
  // Keys this version does not know, kept verbatim.
  Json unknown = Json::object();

  // "entry 3 ('deepseek-r1-fp8')": how errors name the entry.
  std::string Where() const;
};

struct Catalog {
  std::string source;  // file name or other description, for messages
  bool legacy = false;
  std::map<std::string, std::string> extra_args_templates;
  std::map<std::string, std::string> env_templates;
  std::vector<ModelEntry> models;
  // The catalog's own workload grid per suite ("workloads"); a suite without one uses its default.
  std::map<Suite, std::vector<Workload>> grids;
  std::vector<std::string> warnings;  // unknown keys and similar non-fatal findings

  const ModelEntry* Find(const std::string& prefix) const;
};

// Parses a catalog document. Errors name `source` and the entry and field at fault.
Catalog ParseCatalog(const Json& document, const std::string& source);
Catalog LoadCatalog(const std::string& path);

// Parses environment text: one K=V per line; blank lines and lines starting with '#' are skipped and a
// leading "export " is allowed. A line without '=' or with an invalid name is an Error naming `where`.
std::vector<EnvVar> ParseEnvText(const std::string& text, const std::string& where);

}  // namespace fission::catalog
