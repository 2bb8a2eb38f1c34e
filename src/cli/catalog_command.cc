// `fission catalog expand|list|run|report|accuracy`: see src/catalog/ and docs/catalog.md.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "catalog/accuracy.h"
#include "catalog/dashboard.h"
#include "catalog/listing.h"
#include "catalog/report.h"
#include "catalog/runner.h"
#include "catalog/selection_warnings.h"
#include "catalog/serve_check.h"
#include "cli/commands.h"
#include "server/server_args.h"

namespace fission::cli {
namespace {

using namespace fission::catalog;

constexpr const char* kUsage = R"(usage:
  fission catalog expand CATALOG [SELECTION] [--param-lists L] [--format table|json]
  fission catalog list   CATALOG [SELECTION] [--param-lists L] [--format table|json]
  fission catalog run    CATALOG --out DIR [SELECTION] [--param-lists L] [RUN OPTIONS] [--dry-run]
  fission catalog report RUN_DIR [--baseline DIR] [--out DIR] [--fail-on-regression]
  fission catalog accuracy ACCURACY_CATALOG (--validate | --out DIR [RUN OPTIONS] [--eval-cmd T]
                           [--eval-timeout S] [--model NAME,...] [--test-level L] [--dry-run])

selection:
  --suite oob|mesh          only entries of this suite (workload_label SGLang-OOB / SGLang-Mesh)
  --preset P[,P...]         all-oob, all-deepseek, all-deepseek-non-mtp, all-deepseek-mtp, all-qwen,
                            Mesh tags (ds-all, ds-fp4-..., ds-fp8-...), or an entry's exact prefix
  --schedule DAY            mon..sun or today (UTC): the weekday's suite and presets
  --param-lists L           "isl,osl,conc,ratio;..." instead of the catalog's "workloads" or the
                            suite's default grid

expand, list and run --dry-run mark the cells whose server command `fission serve` would refuse
(its own flag checks, no model loaded) and warn about presets and entries that select nothing.

run options:
  --server-cmd T            server command template (default: fission serve ...; see docs/catalog.md)
  --bench-cmd T             bench command template (default: fission bench ...)
  --fission-bin PATH        the binary {fission} stands for (default: this one)
  --models-root DIR         resolve each entry's path under DIR
  --model-override-args J   JSON passed to the server as --json-model-override-args
  --port N                  server port (default: a free loopback port per server)
  --health-timeout S        seconds to wait for GET /health (default 900)
  --stop-timeout S          seconds between SIGTERM and SIGKILL (default 30)
  --cell-timeout S          seconds per bench run (default 3600)
)";

struct Parsed {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;
  bool Has(const std::string& k) const { return values.count(k) > 0; }
  std::string Get(const std::string& k, const std::string& fallback = "") const {
    auto it = values.find(k);
    return it == values.end() ? fallback : it->second;
  }
};

Parsed ParseArgs(const std::vector<std::string>& args, const std::set<std::string>& value_options,
                 const std::set<std::string>& flag_options) {
  Parsed p;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      p.positional.push_back(a);
      continue;
    }
    std::string name = a, value;
    bool has_value = false;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    if (flag_options.count(name)) {
      if (has_value) Fail("option ", name, " takes no value");
      p.flags.insert(name);
    } else if (value_options.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) Fail("option ", name, " needs a value");
        value = args[++i];
      }
      p.values[name] = value;
    } else {
      Fail("unknown option '", name, "'\n", kUsage);
    }
  }
  return p;
}

double PositiveSeconds(const Parsed& p, const std::string& key, double fallback) {
  if (!p.Has(key)) return fallback;
  const std::string v = p.Get(key);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(d > 0)) Fail(key, " must be a positive number of seconds, got '", v, "'");
  return d;
}

int Port(const Parsed& p) {
  if (!p.Has("--port")) return 0;
  const std::string v = p.Get("--port");
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || end != v.c_str() + v.size() || n < 1 || n > 65535) Fail("--port must be in 1..65535, got '", v, "'");
  return static_cast<int>(n);
}

Selection SelectionFrom(const Parsed& p) {
  Selection s;
  if (p.Has("--schedule")) {
    if (p.Has("--preset")) Fail("--schedule and --preset cannot be combined");
    s = ScheduleFor(ParseWeekday(p.Get("--schedule")));
    if (p.Has("--suite") && s.suite && ParseSuite(p.Get("--suite")) != *s.suite) {
      Fail("--suite ", p.Get("--suite"), " contradicts --schedule ", p.Get("--schedule"));
    }
    return s;
  }
  if (p.Has("--suite")) s.suite = ParseSuite(p.Get("--suite"));
  if (p.Has("--preset")) {
    s.presets = SplitList(p.Get("--preset"));
    if (s.presets.empty()) Fail("--preset is empty");
  }
  return s;
}

const std::set<std::string> kSelectionOptions = {"--suite", "--preset", "--schedule", "--param-lists"};

// `fission serve`'s own flag checks, without loading a model.
std::string CheckServeFlags(const std::vector<std::string>& args) {
  try {
    server::ParseServerArgs(args);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::vector<Workload> FlagGrid(const Parsed& p) {
  return p.Has("--param-lists") ? ParseParamLists(p.Get("--param-lists")) : std::vector<Workload>{};
}

std::set<std::string> With(std::set<std::string> base, std::initializer_list<const char*> more) {
  for (const char* m : more) base.insert(m);
  return base;
}

std::string OnlyPositional(const Parsed& p, const char* what) {
  if (p.positional.size() != 1) Fail("expected one ", what, " argument\n", kUsage);
  return p.positional[0];
}

int Expand(const std::vector<std::string>& args, bool cells) {
  const Parsed p = ParseArgs(args, With(kSelectionOptions, {"--format"}), {});
  const Catalog catalog = LoadCatalog(OnlyPositional(p, "CATALOG"));
  const std::string format = p.Get("--format", "table");
  if (format != "table" && format != "json") Fail("--format must be 'table' or 'json', got '", format, "'");
  const std::vector<Workload> grid = FlagGrid(p);
  const Listing listing =
      BuildListing(catalog, SelectionFrom(p), p.Has("--param-lists") ? &grid : nullptr, CheckServeFlags);
  if (format == "json") {
    std::cout << ListingJson(catalog, listing, cells).dump(2) << "\n";
  } else {
    std::cout << ListingTable(catalog, listing, cells);
  }
  return 0;
}

void ReadRunOptions(const Parsed& p, std::string* server_cmd, std::string* fission_bin, std::string* models_root,
                    std::string* override_args, int* port, double* health, double* stop) {
  if (p.Has("--server-cmd")) *server_cmd = p.Get("--server-cmd");
  *fission_bin = p.Get("--fission-bin");
  *models_root = p.Get("--models-root");
  if (!models_root->empty() && !std::filesystem::is_directory(*models_root)) {
    Fail("--models-root '", *models_root, "' is not a directory");
  }
  *override_args = p.Get("--model-override-args");
  *port = Port(p);
  *health = PositiveSeconds(p, "--health-timeout", *health);
  *stop = PositiveSeconds(p, "--stop-timeout", *stop);
}

const std::set<std::string> kRunOptions = {"--out",         "--server-cmd",          "--fission-bin",
                                           "--models-root", "--model-override-args", "--port",
                                           "--health-timeout", "--stop-timeout"};

int Run(const std::vector<std::string>& args) {
  std::set<std::string> options = kSelectionOptions;
  options.insert(kRunOptions.begin(), kRunOptions.end());
  const Parsed p = ParseArgs(args, With(options, {"--bench-cmd", "--cell-timeout"}), {"--dry-run"});
  const Catalog catalog = LoadCatalog(OnlyPositional(p, "CATALOG"));
  for (const std::string& w : catalog.warnings) std::cerr << "warning: " << w << "\n";
  RunOptions o;
  o.dry_run = p.flags.count("--dry-run") > 0;
  o.out_dir = p.Get("--out");
  if (o.out_dir.empty()) {
    if (!o.dry_run) Fail("--out DIR is required");
    o.out_dir = "catalog-run";
  }
  ReadRunOptions(p, &o.server_cmd, &o.fission_bin, &o.models_root, &o.model_override_args, &o.port,
                 &o.health_timeout_s, &o.stop_timeout_s);
  if (p.Has("--bench-cmd")) o.bench_cmd = p.Get("--bench-cmd");
  o.cell_timeout_s = PositiveSeconds(p, "--cell-timeout", o.cell_timeout_s);
  const std::vector<Workload> grid = FlagGrid(p);
  const Grids grids = GridsFor(catalog, p.Has("--param-lists") ? &grid : nullptr);
  const Selection selection = SelectionFrom(p);
  const std::vector<const ModelEntry*> models = Select(catalog, selection);
  std::vector<Cell> cells = ExpandModels(models, grids);
  for (const std::string& w : SelectionWarnings(catalog, selection, models, cells, grids)) {
    std::cerr << "warning: " << w << "\n";
  }
  CheckServeCommands(cells, o.server_cmd, o.models_root, o.model_override_args, CheckServeFlags);
  std::cerr << RefusalSummary(cells);
  if (cells.empty()) {
    std::cerr << "nothing to run: the selection has no cells\n";
    return 0;
  }
  std::cerr << "catalog " << catalog.source << ": " << cells.size() << " cells\n";
  InstallStopHandlers();
  return RunCells(cells, o, std::cout, std::cerr);
}

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream f(path);
  if (!f) Fail("cannot write '", path.string(), "'");
  f << text;
}

int Report(const std::vector<std::string>& args) {
  const Parsed p = ParseArgs(args, {"--baseline", "--out"}, {"--fail-on-regression"});
  const std::string dir = OnlyPositional(p, "RUN_DIR");
  const RunData run = LoadRun(dir);
  std::optional<RunData> baseline;
  if (p.Has("--baseline")) baseline = LoadRun(p.Get("--baseline"));
  const std::filesystem::path out = p.Get("--out", dir);
  std::filesystem::create_directories(out);
  const RunData* base = baseline ? &*baseline : nullptr;
  const std::string markdown = RenderMarkdown(run, base);
  WriteText(out / "report.md", markdown);
  WriteText(out / "dashboard.html", RenderDashboard(run, base));
  std::cout << markdown;
  std::cerr << "wrote " << (out / "report.md").string() << " and " << (out / "dashboard.html").string() << "\n";
  if (base && p.flags.count("--fail-on-regression") && !FindRegressions(run, *base).empty()) return 1;
  return 0;
}

int Accuracy(const std::vector<std::string>& args) {
  const Parsed p = ParseArgs(args, With(kRunOptions, {"--eval-cmd", "--eval-timeout", "--model", "--test-level"}),
                             {"--dry-run", "--validate"});
  const AccuracyCatalog catalog = LoadAccuracyCatalog(OnlyPositional(p, "ACCURACY_CATALOG"));
  for (const std::string& w : catalog.warnings) std::cerr << "warning: " << w << "\n";
  std::vector<const AccuracyEntry*> entries;
  const std::vector<std::string> names = SplitList(p.Get("--model"));
  for (const std::string& n : names) {
    if (std::none_of(catalog.entries.begin(), catalog.entries.end(),
                     [&](const AccuracyEntry& e) { return e.model_name == n; })) {
      Fail(catalog.source, ": no entry named '", n, "'");
    }
  }
  for (const AccuracyEntry& e : catalog.entries) {
    if (!names.empty() && std::find(names.begin(), names.end(), e.model_name) == names.end()) continue;
    if (p.Has("--test-level") && e.test_level != p.Get("--test-level")) continue;
    entries.push_back(&e);
  }
  if (p.flags.count("--validate")) {
    std::cout << catalog.source << ": " << catalog.entries.size() << " entries valid\n";
    for (const AccuracyEntry* e : entries) {
      std::cout << "  " << e->model_name << "  " << e->model_path << "  threshold " << e->threshold
                << (e->test_level.empty() ? "" : "  level " + e->test_level) << "\n";
    }
    return 0;
  }
  AccuracyOptions o;
  o.dry_run = p.flags.count("--dry-run") > 0;
  o.out_dir = p.Get("--out");
  if (o.out_dir.empty()) {
    if (!o.dry_run) Fail("--out DIR is required");
    o.out_dir = "catalog-accuracy";
  }
  ReadRunOptions(p, &o.server_cmd, &o.fission_bin, &o.models_root, &o.model_override_args, &o.port,
                 &o.health_timeout_s, &o.stop_timeout_s);
  if (p.Has("--eval-cmd")) o.eval_cmd = p.Get("--eval-cmd");
  o.eval_timeout_s = PositiveSeconds(p, "--eval-timeout", o.eval_timeout_s);
  InstallStopHandlers();
  return RunAccuracy(entries, o, std::cout, std::cerr);
}

bool IsHelp(const std::string& a) { return a == "--help" || a == "-h"; }

}  // namespace

int RunCatalog(const std::vector<std::string>& args) {
  if (args.empty() || IsHelp(args[0])) {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  // `fission catalog run --help` (any subcommand) prints the usage.
  if (std::any_of(rest.begin(), rest.end(), IsHelp)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // File-system and JSON access failures on user paths and files are input errors, not crashes.
  try {
    if (sub == "expand") return Expand(rest, true);
    if (sub == "list") return Expand(rest, false);
    if (sub == "run") return Run(rest);
    if (sub == "report") return Report(rest);
    if (sub == "accuracy") return Accuracy(rest);
  } catch (const std::filesystem::filesystem_error& e) {
    Fail(e.what());
  } catch (const Json::exception& e) {
    Fail(e.what());
  }
  Fail("unknown catalog command '", sub, "'\n", kUsage);
}

FISSION_COMMAND("catalog", "expand, list, run and report a benchmark catalog", RunCatalog);

}  // namespace fission::cli
