#include "catalog/expansion.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "catalog/text.h"

namespace fission::catalog {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

std::int64_t ParsePositive(const std::string& text, const char* what, const std::string& item) {
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || v <= 0) {
    Fail("--param-lists item \"", item, "\": ", what, " must be a positive integer, got \"", text, "\"");
  }
  return v;
}

double ParseRatio(const std::string& text, const std::string& item) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !(v > 0.0) || v > 1.0) {
    Fail("--param-lists item \"", item, "\": ratio must be a number in (0, 1], got \"", text, "\"");
  }
  return v;
}

std::vector<Workload> Grid(const std::vector<std::int64_t>& concs, std::int64_t isl, std::int64_t osl,
                           double ratio) {
  std::vector<Workload> out;
  for (std::int64_t c : concs) out.push_back({isl, osl, c, ratio});
  return out;
}

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::vector<Workload> ParseParamLists(const std::string& text) {
  std::vector<Workload> out;
  for (const std::string& raw : Split(text, ';')) {
    const std::string item = Trim(raw);
    if (item.empty()) continue;
    std::vector<std::string> f = Split(item, ',');
    if (f.size() != 4) Fail("--param-lists item \"", item, "\" must be isl,osl,conc,ratio");
    for (std::string& s : f) s = Trim(s);
    out.push_back({ParsePositive(f[0], "isl", item), ParsePositive(f[1], "osl", item),
                   ParsePositive(f[2], "concurrency", item), ParseRatio(f[3], item)});
  }
  if (out.empty()) Fail("--param-lists is empty");
  return out;
}

std::vector<Workload> DefaultGrid(Suite suite) {
  std::vector<Workload> out;
  auto append = [&](std::vector<Workload> more) { out.insert(out.end(), more.begin(), more.end()); };
  if (suite == Suite::kOob) {
    const std::vector<std::int64_t> concs = {4, 8, 16, 32, 64};
    append(Grid(concs, 1024, 1024, 0.8));
    append(Grid(concs, 8192, 1024, 0.8));
  } else {
    append(Grid({2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048}, 8192, 1, 1.0));
    append(Grid({2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048, 4096}, 1, 1024, 1.0));
  }
  return out;
}

namespace {

std::int64_t PositiveField(const Json& item, const char* key, const std::string& where) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0) {
    Fail(where, ": '", key, "' must be a positive integer, got ", it == item.end() ? "nothing" : it->dump());
  }
  return it->get<std::int64_t>();
}

// {"isl", "osl", "concurrency": N or [N, ...], "ratio"}: one workload per concurrency.
std::vector<Workload> WorkloadsOfObject(const Json& item, const std::string& where) {
  for (auto kv = item.begin(); kv != item.end(); ++kv) {
    if (kv.key() != "isl" && kv.key() != "osl" && kv.key() != "concurrency" && kv.key() != "ratio") {
      Fail(where, ": unknown key '", kv.key(), "' (isl, osl, concurrency, ratio)");
    }
  }
  const std::int64_t isl = PositiveField(item, "isl", where), osl = PositiveField(item, "osl", where);
  double ratio = 1.0;
  if (auto r = item.find("ratio"); r != item.end()) {
    if (!r->is_number() || !(r->get<double>() > 0) || r->get<double>() > 1) {
      Fail(where, ": 'ratio' must be a number in (0, 1], got ", r->dump());
    }
    ratio = r->get<double>();
  }
  const Json& conc = item.contains("concurrency") ? item["concurrency"] : Json(nullptr);
  std::vector<Workload> out;
  if (conc.is_array()) {
    if (conc.empty()) Fail(where, ": 'concurrency' is an empty list");
    for (size_t i = 0; i < conc.size(); ++i) {
      out.push_back({isl, osl, PositiveField(Json{{"concurrency", conc[i]}}, "concurrency", where), ratio});
    }
  } else {
    out.push_back({isl, osl, PositiveField(item, "concurrency", where), ratio});
  }
  return out;
}

std::vector<Workload> ParseGridValue(const Json& value, const std::string& where) {
  auto from_text = [&](const std::string& text, const std::string& at) {
    try {
      return ParseParamLists(text);
    } catch (const Error& e) {
      Fail(at, ": ", e.what());
    }
  };
  if (value.is_string()) return from_text(value.get<std::string>(), where);
  if (!value.is_array() || value.empty()) {
    Fail(where, ": expected a non-empty list of workloads or an \"isl,osl,conc,ratio;...\" string");
  }
  std::vector<Workload> out;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string at = StrCat(where, " item ", i);
    std::vector<Workload> more;
    if (value[i].is_string()) {
      more = from_text(value[i].get<std::string>(), at);
    } else if (value[i].is_object()) {
      more = WorkloadsOfObject(value[i], at);
    } else {
      Fail(at, ": expected an object or an \"isl,osl,conc,ratio\" string, got ", value[i].dump());
    }
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

}  // namespace

std::map<Suite, std::vector<Workload>> ParseCatalogGrids(const Json& value, const std::string& where) {
  std::map<Suite, std::vector<Workload>> grids;
  if (!value.is_object()) {
    const std::vector<Workload> grid = ParseGridValue(value, where);
    grids[Suite::kOob] = grid;
    grids[Suite::kMesh] = grid;
    return grids;
  }
  for (auto kv = value.begin(); kv != value.end(); ++kv) {
    Suite suite;
    if (kv.key() == kOobLabel) {
      suite = Suite::kOob;
    } else if (kv.key() == kMeshLabel) {
      suite = Suite::kMesh;
    } else {
      Fail(where, ": unknown workload label '", kv.key(), "' (", kOobLabel, ", ", kMeshLabel, ")");
    }
    grids[suite] = ParseGridValue(kv.value(), StrCat(where, ".", kv.key()));
  }
  return grids;
}

const std::vector<Workload>& Grids::For(Suite suite) const {
  static const std::vector<Workload> kOob = DefaultGrid(Suite::kOob), kMesh = DefaultGrid(Suite::kMesh);
  if (flag) return *flag;
  if (catalog) {
    if (auto it = catalog->find(suite); it != catalog->end()) return it->second;
  }
  return suite == Suite::kOob ? kOob : kMesh;
}

std::string Grids::Source(Suite suite) const {
  if (flag) return "--param-lists";
  if (catalog && catalog->count(suite)) return "the catalog's workloads";
  return StrCat("the ", SuiteName(suite), " default grid");
}

Grids GridsFor(const Catalog& catalog, const std::vector<Workload>* flag) { return Grids{flag, &catalog.grids}; }

std::string FormatRatio(double ratio) {
  for (int precision = 1; precision <= 17; ++precision) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*g", precision, ratio);
    if (std::strtod(buf, nullptr) == ratio) return buf;
  }
  return std::to_string(ratio);
}

std::string CellName(const std::string& prefix, const Workload& w) {
  return StrCat(prefix, "-", w.isl, "-", w.osl, "-", w.concurrency, "-", FormatRatio(w.ratio));
}

std::int64_t PromptMultiplier(const ModelEntry& m) {
  const bool wide = m.suite == Suite::kMesh && m.dp_size.value_or(1) > 1 && m.ep_size.value_or(1) > 1;
  return wide ? 3 : 10;
}

std::int64_t WarmupMultiplier(const ModelEntry& m) {
  const bool wide = m.suite == Suite::kMesh && m.dp_size.value_or(1) > 1 && m.ep_size.value_or(1) > 1;
  return wide ? 1 : 2;
}

std::vector<Cell> ExpandModel(const ModelEntry& model, const std::vector<Workload>* grid) {
  const std::vector<Workload> defaults = grid ? std::vector<Workload>{} : DefaultGrid(model.suite);
  const std::vector<Workload>& g = grid ? *grid : defaults;

  std::vector<Workload> unique;
  for (const Workload& w : g) {
    if (std::find(unique.begin(), unique.end(), w) == unique.end()) unique.push_back(w);
  }

  std::vector<Cell> cells;
  for (const Workload& w : unique) {
    const std::string pair = w.Pair().Name();
    if (model.supported_pairs && !Contains(*model.supported_pairs, pair)) continue;
    if (Contains(model.excluded_pairs, pair)) continue;
    const std::vector<std::int64_t>* allowed = nullptr;
    if (auto it = model.concurrency_by_pair.find(pair); it != model.concurrency_by_pair.end()) {
      allowed = &it->second;
    } else if (model.supported_concurrency) {
      allowed = &*model.supported_concurrency;
    }
    if (allowed && std::find(allowed->begin(), allowed->end(), w.concurrency) == allowed->end()) continue;

    Cell c;
    c.model = &model;
    c.workload = w;
    c.name = CellName(model.prefix, w);
    std::vector<std::string> args;
    if (model.suite == Suite::kMesh && model.tp_size) args.push_back(StrCat("--tensor-parallel-size ", *model.tp_size));
    if (!model.extra_args.empty()) args.push_back(model.extra_args);
    if (auto it = model.case_extra_args_by_pair.find(pair); it != model.case_extra_args_by_pair.end() &&
                                                            !it->second.empty()) {
      args.push_back(it->second);
    }
    for (const std::string& a : args) c.server_args += (c.server_args.empty() ? "" : " ") + a;
    c.env = model.env;
    if (auto it = model.case_env_by_pair.find(pair); it != model.case_env_by_pair.end()) {
      c.env = MergeEnv(c.env, it->second);
    }
    c.num_prompts = PromptMultiplier(model) * w.concurrency;
    c.num_warmups = WarmupMultiplier(model) * w.concurrency;
    cells.push_back(std::move(c));
  }
  return cells;
}

std::vector<Cell> ExpandModels(const std::vector<const ModelEntry*>& models, const Grids& grids) {
  std::vector<Cell> out;
  for (const ModelEntry* m : models) {
    std::vector<Cell> cells = ExpandModel(*m, &grids.For(m->suite));
    out.insert(out.end(), std::make_move_iterator(cells.begin()), std::make_move_iterator(cells.end()));
  }
  return out;
}

std::string NoCellReason(const ModelEntry& model, const std::vector<Workload>& grid) {
  std::vector<std::string> pairs;
  for (const Workload& w : grid) {
    if (!Contains(pairs, w.Pair().Name())) pairs.push_back(w.Pair().Name());
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
    return out;
  };
  std::vector<std::string> kept;
  for (const std::string& p : pairs) {
    if (model.supported_pairs && !Contains(*model.supported_pairs, p)) continue;
    if (!Contains(model.excluded_pairs, p)) kept.push_back(p);
  }
  if (kept.empty() && model.supported_pairs) {
    return StrCat("its supported_input_output_pairs (", list(*model.supported_pairs), ") match none of the grid's pairs (",
                  list(pairs), ")");
  }
  if (kept.empty()) return StrCat("its excluded_input_output_pairs exclude every pair of the grid (", list(pairs), ")");
  return StrCat("its concurrency filters keep none of the grid's concurrencies for ", list(kept));
}

std::vector<Cell> ExpandModels(const std::vector<const ModelEntry*>& models, const std::vector<Workload>* grid) {
  std::vector<Cell> out;
  for (const ModelEntry* m : models) {
    std::vector<Cell> cells = ExpandModel(*m, grid);
    out.insert(out.end(), std::make_move_iterator(cells.begin()), std::make_move_iterator(cells.end()));
  }
  return out;
}

}  // namespace fission::catalog
