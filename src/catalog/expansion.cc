#include "catalog/expansion.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace fission::catalog {
namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

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

std::vector<Cell> ExpandModels(const std::vector<const ModelEntry*>& models, const std::vector<Workload>* grid) {
  std::vector<Cell> out;
  for (const ModelEntry* m : models) {
    std::vector<Cell> cells = ExpandModel(*m, grid);
    out.insert(out.end(), std::make_move_iterator(cells.begin()), std::make_move_iterator(cells.end()));
  }
  return out;
}

}  // namespace fission::catalog
