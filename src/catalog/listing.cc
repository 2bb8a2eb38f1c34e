#include "catalog/listing.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "catalog/command_template.h"
#include "catalog/selection_warnings.h"

namespace fission::catalog {
namespace {

Json EnvObject(const std::vector<EnvVar>& env) {
  Json out = Json::object();
  for (const EnvVar& v : env) out[v.name] = v.value;
  return out;
}

std::string EnvText(const std::vector<EnvVar>& env) {
  std::string out;
  for (const EnvVar& v : env) out += (out.empty() ? "" : " ") + v.name + "=" + v.value;
  return out;
}

// Left-aligned columns sized to their widest cell.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::ostringstream out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
  return out.str();
}

// "ok", "REFUSED" (the reasons follow the table) or "-" when the server command was not checked.
std::string ServeMark(const Cell& c) {
  if (!c.serve_checked) return "-";
  return c.serve_refusal.empty() ? "ok" : "REFUSED";
}

// Cells of `model` (every model when null) that fission serve would refuse.
size_t RefusedCells(const Listing& l, const ModelEntry* model) {
  return static_cast<size_t>(std::count_if(l.cells.begin(), l.cells.end(), [&](const Cell& c) {
    return (model == nullptr || c.model == model) && !c.serve_refusal.empty();
  }));
}

}  // namespace

Listing BuildListing(const Catalog& catalog, const Selection& selection, const std::vector<Workload>* grid,
                     const ServeFlagCheck& check) {
  Listing l;
  const Grids grids = GridsFor(catalog, grid);
  l.models = Select(catalog, selection);
  l.cells = ExpandModels(l.models, grids);
  CheckServeCommands(l.cells, kDefaultServerCommand, "", "", check);
  l.warnings = SelectionWarnings(catalog, selection, l.models, l.cells, grids);
  for (const ModelEntry* m : l.models) {
    const size_t n = std::count_if(l.cells.begin(), l.cells.end(), [&](const Cell& c) { return c.model == m; });
    l.per_model.emplace_back(m->prefix, n);
  }
  for (const std::string& preset : KnownPresets(catalog)) {
    Selection s;
    s.suite = selection.suite;
    s.presets = {preset};
    l.per_preset.emplace_back(preset, ExpandModels(Select(catalog, s), grids).size());
  }
  return l;
}

Json ListingJson(const Catalog& catalog, const Listing& l, bool with_cells) {
  Json out{{"catalog", catalog.source}, {"legacy", catalog.legacy}};
  if (with_cells) {
    Json cells = Json::array();
    for (const Cell& c : l.cells) {
      cells.push_back({{"name", c.name},
                       {"prefix", c.model->prefix},
                       {"workload_label", c.model->workload_label},
                       {"path", c.model->path},
                       {"isl", c.workload.isl},
                       {"osl", c.workload.osl},
                       {"concurrency", c.workload.concurrency},
                       {"ratio", c.workload.ratio},
                       {"num_prompts", c.num_prompts},
                       {"num_warmups", c.num_warmups},
                       {"server_args", c.server_args},
                       {"env", EnvObject(c.env)},
                       {"bench_args", c.model->bench_args},
                       {"serve_checked", c.serve_checked},
                       {"serve_refusal", c.serve_refusal.empty() ? Json(nullptr) : Json(c.serve_refusal)}});
    }
    out["cells"] = cells;
  } else {
    Json models = Json::array();
    for (size_t i = 0; i < l.models.size(); ++i) {
      const ModelEntry& m = *l.models[i];
      models.push_back({{"prefix", m.prefix},
                        {"display", m.display},
                        {"dashboard_model", m.dashboard_model},
                        {"workload_label", m.workload_label},
                        {"path", m.path},
                        {"runner", m.runner},
                        {"nightly_group", m.nightly_group},
                        {"mesh_presets", m.mesh_presets},
                        {"extra_args", m.extra_args},
                        {"env", EnvObject(m.env)},
                        {"unknown", m.unknown},
                        {"cells", l.per_model[i].second},
                        {"refused_cells", RefusedCells(l, &m)}});
    }
    out["models"] = models;
  }
  Json per_model = Json::object(), per_preset = Json::object();
  for (const auto& [k, n] : l.per_model) per_model[k] = n;
  for (const auto& [k, n] : l.per_preset) per_preset[k] = n;
  out["counts"] = {{"models", l.models.size()}, {"cells", l.cells.size()}, {"per_model", per_model},
                   {"per_preset", per_preset}};
  out["counts"]["refused_cells"] = RefusedCells(l, nullptr);
  Json warnings = catalog.warnings;
  for (const std::string& w : l.warnings) warnings.push_back(w);
  out["warnings"] = warnings;
  return out;
}

std::string ListingTable(const Catalog& catalog, const Listing& l, bool with_cells) {
  std::ostringstream out;
  std::vector<std::vector<std::string>> rows;
  if (with_cells) {
    rows.push_back({"CELL", "ISL", "OSL", "CONC", "RATIO", "PROMPTS", "WARMUPS", "SERVE", "SERVER ARGS", "ENV"});
    for (const Cell& c : l.cells) {
      rows.push_back({c.name, std::to_string(c.workload.isl), std::to_string(c.workload.osl),
                      std::to_string(c.workload.concurrency), FormatRatio(c.workload.ratio),
                      std::to_string(c.num_prompts), std::to_string(c.num_warmups), ServeMark(c), c.server_args,
                      EnvText(c.env)});
    }
  } else {
    rows.push_back({"PREFIX", "SUITE", "DISPLAY", "PATH", "CELLS", "REFUSED"});
    for (size_t i = 0; i < l.models.size(); ++i) {
      const ModelEntry& m = *l.models[i];
      rows.push_back({m.prefix, SuiteName(m.suite), m.display, m.path, std::to_string(l.per_model[i].second),
                      std::to_string(RefusedCells(l, &m))});
    }
  }
  out << Table(rows) << "\n";
  out << "total: " << l.models.size() << " models, " << l.cells.size() << " cells\n";
  if (with_cells) {
    std::vector<std::vector<std::string>> per_model = {{"per model:", "CELLS"}};
    for (const auto& [k, n] : l.per_model) per_model.push_back({"  " + k, std::to_string(n)});
    out << Table(per_model);
  }
  std::vector<std::vector<std::string>> per_preset = {{"per preset:", "CELLS"}};
  for (const auto& [k, n] : l.per_preset) per_preset.push_back({"  " + k, std::to_string(n)});
  out << Table(per_preset);
  out << RefusalSummary(l.cells);
  for (const std::string& w : catalog.warnings) out << "warning: " << w << "\n";
  for (const std::string& w : l.warnings) out << "warning: " << w << "\n";
  return out.str();
}

}  // namespace fission::catalog
