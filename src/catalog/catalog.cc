#include "catalog/catalog.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "base/mapped_file.h"
#include "catalog/expansion.h"
#include "catalog/text.h"

namespace fission::catalog {
namespace {

const std::set<std::string>& KnownEntryKeys() {
  static const std::set<std::string> kKeys = {
      "display",          "dashboard_model",
      "workload_label",   "source_path",
      "path",             "prefix",
      "extra_args",       "env_vars",
      "bench_args",       "runner",
      "nightly_group",    "mesh_spec_mode",
      "mesh_presets",     "tp_size",
      "dp_size",          "ep_size",
      "supported_input_output_pairs",
      "excluded_input_output_pairs",
      "supported_concurrency_values_by_pair",
      "supported_concurrency_values",
      "case_extra_args_by_pair",
      "case_env_vars_by_pair",
  };
  return kKeys;
}

bool IsSlug(const std::string& s) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

bool IsEnvName(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// Optional string field; absent or null gives "".
std::string OptString(const Json& entry, const std::string& key, const std::string& where) {
  return GetString(entry, key, where, "");
}

// A string or a list of strings, as a list. Absent or null gives an empty list.
std::vector<std::string> StringOrList(const Json& entry, const std::string& key, const std::string& where) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return {};
  if (it->is_string()) return {it->get<std::string>()};
  if (it->is_array()) {
    std::vector<std::string> out;
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& v = (*it)[i];
      if (!v.is_string()) Fail(where, ": field '", key, "' element ", i, " must be a string, got ", v.dump());
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  Fail(where, ": field '", key, "' must be a string or a list of strings, got ", it->dump());
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// Resolves each element against `templates` (exact name, literal fallback) and joins.
std::string Resolve(const std::vector<std::string>& elements, const std::map<std::string, std::string>& templates,
                    const std::string& sep) {
  std::vector<std::string> parts;
  for (const std::string& e : elements) {
    auto it = templates.find(e);
    parts.push_back(Trim(it != templates.end() ? it->second : e));
  }
  return Join(parts, sep);
}

std::int64_t PositiveInt(const Json& v, const std::string& what, const std::string& where) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    const std::int64_t n = v.get<std::int64_t>();
    if (n > 0) return n;
  }
  Fail(where, ": ", what, " must be a positive integer, got ", v.dump());
}

std::optional<std::int64_t> OptPositiveInt(const Json& entry, const std::string& key, const std::string& where) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return std::nullopt;
  return PositiveInt(*it, StrCat("field '", key, "'"), where);
}

std::vector<std::int64_t> ConcurrencyList(const Json& v, const std::string& what, const std::string& where) {
  if (!v.is_array()) Fail(where, ": ", what, " must be a list of concurrency values, got ", v.dump());
  std::vector<std::int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& c = v[i];
    if (c.is_number() && c.get<double>() <= 0) {
      Fail(where, ": ", what, " has a non-positive concurrency ", c.dump());
    }
    out.push_back(PositiveInt(c, StrCat(what, " element ", i), where));
  }
  return out;
}

std::vector<std::string> PairList(const Json& entry, const std::string& key, const std::string& where) {
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return {};
  if (!it->is_array()) Fail(where, ": field '", key, "' must be a list of \"ISLxOSL\" pairs, got ", it->dump());
  std::vector<std::string> out;
  for (const Json& v : *it) {
    if (!v.is_string()) Fail(where, ": field '", key, "' has a malformed pair ", v.dump());
    out.push_back(ParseIoPair(v.get<std::string>(), StrCat(where, ": field '", key, "'")).Name());
  }
  return out;
}

// An object keyed by pair; `parse` turns each value into T.
template <typename T, typename F>
std::map<std::string, T> ByPair(const Json& entry, const std::string& key, const std::string& where, F parse) {
  std::map<std::string, T> out;
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return out;
  if (!it->is_object()) Fail(where, ": field '", key, "' must be an object keyed by \"ISLxOSL\", got ", it->dump());
  for (auto kv = it->begin(); kv != it->end(); ++kv) {
    const std::string field = StrCat("field '", key, "'");
    const std::string pair = ParseIoPair(kv.key(), StrCat(where, ": ", field)).Name();
    if (out.count(pair)) Fail(where, ": ", field, " lists pair ", pair, " twice");
    out.emplace(pair, parse(kv.value(), StrCat(field, "[\"", kv.key(), "\"]")));
  }
  return out;
}

std::vector<std::string> StringOrListValue(const Json& v, const std::string& what, const std::string& where) {
  Json wrapper = Json::object();
  wrapper["v"] = v;
  try {
    return StringOrList(wrapper, "v", where);
  } catch (const Error&) {
    Fail(where, ": ", what, " must be a string or a list of strings, got ", v.dump());
  }
}

std::map<std::string, std::string> ParseTemplates(const Json& templates, const std::string& key,
                                                  const std::string& where, const std::string& sep) {
  std::map<std::string, std::string> out;
  auto it = templates.find(key);
  if (it == templates.end() || it->is_null()) return out;
  if (!it->is_object()) Fail(where, ": 'templates.", key, "' must be an object of NAME: text, got ", it->dump());
  for (auto kv = it->begin(); kv != it->end(); ++kv) {
    const std::vector<std::string> parts =
        StringOrListValue(kv.value(), StrCat("template '", kv.key(), "'"), StrCat(where, ": templates.", key));
    std::vector<std::string> trimmed;
    for (const std::string& p : parts) trimmed.push_back(Trim(p));
    out.emplace(kv.key(), Join(trimmed, sep));
  }
  return out;
}

ModelEntry ParseEntry(const Json& e, int index, const Catalog& catalog) {
  const std::string position = StrCat(catalog.source, ": entry ", index);
  if (!e.is_object()) Fail(position, ": expected a JSON object, got ", e.dump());
  ModelEntry m;
  m.index = index;
  // The prefix names the entry in every later message.
  auto p = e.find("prefix");
  if (p == e.end() || p->is_null()) Fail(position, ": missing field 'prefix'");
  if (!p->is_string() || !IsSlug(p->get<std::string>())) {
    Fail(position, ": field 'prefix' must be a slug of letters, digits, '-', '_' or '.', got ", p->dump());
  }
  m.prefix = p->get<std::string>();
  const std::string where = StrCat(catalog.source, ": ", m.Where());

  m.display = OptString(e, "display", where);
  if (m.display.empty()) m.display = m.prefix;
  m.dashboard_model = OptString(e, "dashboard_model", where);
  if (m.dashboard_model.empty()) m.dashboard_model = m.display;
  m.workload_label = GetString(e, "workload_label", where, kOobLabel);
  if (m.workload_label == kOobLabel) {
    m.suite = Suite::kOob;
  } else if (m.workload_label == kMeshLabel) {
    m.suite = Suite::kMesh;
  } else {
    Fail(where, ": field 'workload_label' must be \"", kOobLabel, "\" or \"", kMeshLabel, "\", got \"",
         m.workload_label, "\"");
  }
  m.source_path = OptString(e, "source_path", where);
  m.path = OptString(e, "path", where);
  if (m.path.empty()) m.path = m.source_path;
  if (m.path.empty()) Fail(where, ": missing field 'path' (and no 'source_path' to fall back on)");
  m.runner = OptString(e, "runner", where);
  m.nightly_group = OptString(e, "nightly_group", where);
  m.bench_args = Join(StringOrList(e, "bench_args", where), " ");
  m.extra_args = Resolve(StringOrList(e, "extra_args", where), catalog.extra_args_templates, " ");
  m.env = ParseEnvText(Resolve(StringOrList(e, "env_vars", where), catalog.env_templates, "\n"),
                       StrCat(where, ": field 'env_vars'"));

  m.mesh_spec_mode = OptString(e, "mesh_spec_mode", where);
  m.mesh_presets = StringOrList(e, "mesh_presets", where);
  m.tp_size = OptPositiveInt(e, "tp_size", where);
  m.dp_size = OptPositiveInt(e, "dp_size", where);
  m.ep_size = OptPositiveInt(e, "ep_size", where);
  if (m.suite == Suite::kMesh && !m.tp_size) Fail(where, ": a ", kMeshLabel, " entry needs 'tp_size'");

  if (e.contains("supported_input_output_pairs") && !e["supported_input_output_pairs"].is_null()) {
    m.supported_pairs = PairList(e, "supported_input_output_pairs", where);
  }
  m.excluded_pairs = PairList(e, "excluded_input_output_pairs", where);
  m.concurrency_by_pair = ByPair<std::vector<std::int64_t>>(
      e, "supported_concurrency_values_by_pair", where,
      [&](const Json& v, const std::string& what) { return ConcurrencyList(v, what, where); });
  if (e.contains("supported_concurrency_values") && !e["supported_concurrency_values"].is_null()) {
    m.supported_concurrency =
        ConcurrencyList(e["supported_concurrency_values"], "field 'supported_concurrency_values'", where);
  }
  m.case_extra_args_by_pair =
      ByPair<std::string>(e, "case_extra_args_by_pair", where, [&](const Json& v, const std::string& what) {
        return Resolve(StringOrListValue(v, what, where), catalog.extra_args_templates, " ");
      });
  m.case_env_by_pair =
      ByPair<std::vector<EnvVar>>(e, "case_env_vars_by_pair", where, [&](const Json& v, const std::string& what) {
        return ParseEnvText(Resolve(StringOrListValue(v, what, where), catalog.env_templates, "\n"),
                            StrCat(where, ": ", what));
      });

  for (auto kv = e.begin(); kv != e.end(); ++kv) {
    if (!KnownEntryKeys().count(kv.key())) m.unknown[kv.key()] = kv.value();
  }
  return m;
}

}  // namespace

const char* SuiteName(Suite suite) { return suite == Suite::kOob ? "oob" : "mesh"; }

Suite ParseSuite(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "oob") return Suite::kOob;
  if (lower == "mesh") return Suite::kMesh;
  Fail("--suite must be 'oob' or 'mesh', got '", text, "'");
}

std::vector<EnvVar> MergeEnv(std::vector<EnvVar> base, const std::vector<EnvVar>& additions) {
  for (const EnvVar& a : additions) {
    auto it = std::find_if(base.begin(), base.end(), [&](const EnvVar& b) { return b.name == a.name; });
    if (it != base.end()) {
      it->value = a.value;
    } else {
      base.push_back(a);
    }
  }
  return base;
}

std::string IoPair::Name() const { return StrCat(isl, "x", osl); }

IoPair ParseIoPair(const std::string& text, const std::string& where) {
  const size_t x = text.find('x');
  auto number = [&](const std::string& s) -> std::int64_t {
    if (s.empty() || s.size() > 12 ||
        !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      Fail(where, ": malformed input/output pair \"", text, "\" (expected ISLxOSL, e.g. \"8192x1\")");
    }
    const std::int64_t n = std::stoll(s);
    if (n <= 0) Fail(where, ": malformed input/output pair \"", text, "\" (lengths must be positive)");
    return n;
  };
  if (x == std::string::npos) {
    Fail(where, ": malformed input/output pair \"", text, "\" (expected ISLxOSL, e.g. \"8192x1\")");
  }
  return IoPair{number(text.substr(0, x)), number(text.substr(x + 1))};
}

std::string ModelEntry::Where() const { return StrCat("entry ", index, " ('", prefix, "')"); }

const ModelEntry* Catalog::Find(const std::string& prefix) const {
  for (const ModelEntry& m : models) {
    if (m.prefix == prefix) return &m;
  }
  return nullptr;
}

std::vector<EnvVar> ParseEnvText(const std::string& text, const std::string& where) {
  std::vector<EnvVar> out;
  size_t start = 0;
  int line_no = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = Trim(text.substr(start, end - start));
    ++line_no;
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = Trim(line.substr(7));
    const size_t eq = line.find('=');
    if (eq == std::string::npos) Fail(where, ": line ", line_no, " \"", line, "\" is not NAME=VALUE");
    EnvVar v{Trim(line.substr(0, eq)), Trim(line.substr(eq + 1))};
    if (!IsEnvName(v.name)) Fail(where, ": line ", line_no, " has an invalid variable name \"", v.name, "\"");
    out = MergeEnv(std::move(out), {v});
  }
  return out;
}

Catalog ParseCatalog(const Json& document, const std::string& source) {
  Catalog catalog;
  catalog.source = source;
  const Json* models = nullptr;
  if (document.is_array()) {
    catalog.legacy = true;
    models = &document;
  } else if (document.is_object()) {
    auto m = document.find("models");
    if (m == document.end() || !m->is_array()) Fail(source, ": expected a 'models' list (or a legacy JSON array)");
    models = &*m;
    auto t = document.find("templates");
    if (t != document.end() && !t->is_null()) {
      if (!t->is_object()) Fail(source, ": 'templates' must be an object, got ", t->dump());
      catalog.extra_args_templates = ParseTemplates(*t, "extra_args", source, " ");
      catalog.env_templates = ParseTemplates(*t, "env_vars", source, "\n");
      for (auto kv = t->begin(); kv != t->end(); ++kv) {
        if (kv.key() != "extra_args" && kv.key() != "env_vars") {
          catalog.warnings.push_back(StrCat(source, ": unknown key 'templates.", kv.key(), "' kept"));
        }
      }
    }
    if (auto w = document.find("workloads"); w != document.end() && !w->is_null()) {
      catalog.grids = ParseCatalogGrids(*w, StrCat(source, ": 'workloads'"));
    }
    for (auto kv = document.begin(); kv != document.end(); ++kv) {
      if (kv.key() != "models" && kv.key() != "templates" && kv.key() != "workloads") {
        catalog.warnings.push_back(StrCat(source, ": unknown top-level key '", kv.key(), "' kept"));
      }
    }
  } else {
    Fail(source, ": a catalog is a JSON array of entries or an object with 'models'");
  }

  for (size_t i = 0; i < models->size(); ++i) {
    ModelEntry m = ParseEntry((*models)[i], static_cast<int>(i), catalog);
    if (const ModelEntry* other = catalog.Find(m.prefix)) {
      Fail(source, ": ", m.Where(), ": duplicate prefix, already used by entry ", other->index);
    }
    for (auto kv = m.unknown.begin(); kv != m.unknown.end(); ++kv) {
      catalog.warnings.push_back(StrCat(source, ": ", m.Where(), ": unknown key '", kv.key(), "' kept"));
    }
    catalog.models.push_back(std::move(m));
  }
  return catalog;
}

Catalog LoadCatalog(const std::string& path) {
  if (!FileExists(path)) Fail("catalog file '", path, "' does not exist");
  return ParseCatalog(ReadJsonFile(path), path);
}

}  // namespace fission::catalog
