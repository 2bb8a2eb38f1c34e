#include "catalog/accuracy.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/mapped_file.h"
#include "catalog/process.h"
#include "catalog/runner.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;

const std::set<std::string>& KnownKeys() {
  static const std::set<std::string> kKeys = {"model_name", "model_path", "extraArgs", "extra_args",
                                              "env_vars",   "runner",     "test_level", "accuracy_threshold",
                                              "accuracy_test_threshold"};
  return kKeys;
}

std::string JoinedStrings(const Json& e, const std::string& key, const std::string& sep, const std::string& where) {
  auto it = e.find(key);
  if (it == e.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) Fail(where, ": field '", key, "' must be a string or a list of strings, got ", it->dump());
  std::string out;
  for (const Json& v : *it) {
    if (!v.is_string()) Fail(where, ": field '", key, "' has a non-string element ", v.dump());
    if (v.get<std::string>().empty()) continue;
    out += (out.empty() ? "" : sep) + v.get<std::string>();
  }
  return out;
}

const Json* FindScoreIn(const Json& metrics) {
  if (!metrics.is_object()) return nullptr;
  auto it = metrics.find("exact_match,flexible-extract");
  return it != metrics.end() && it->is_number() ? &*it : nullptr;
}

std::string SafeName(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  }
  return s;
}

}  // namespace

std::string AccuracyEntry::Where() const { return StrCat("entry ", index, " ('", model_name, "')"); }

AccuracyCatalog ParseAccuracyCatalog(const Json& document, const std::string& source) {
  AccuracyCatalog catalog;
  catalog.source = source;
  if (!document.is_array()) Fail(source, ": an accuracy catalog is a JSON array of entries");
  std::set<std::string> names;
  for (size_t i = 0; i < document.size(); ++i) {
    const Json& e = document[i];
    const std::string position = StrCat(source, ": entry ", i);
    if (!e.is_object()) Fail(position, ": expected a JSON object, got ", e.dump());
    AccuracyEntry a;
    a.index = static_cast<int>(i);
    a.model_name = GetString(e, "model_name", position);
    if (a.model_name.empty()) Fail(position, ": field 'model_name' is empty");
    const std::string where = StrCat(source, ": ", a.Where());
    if (!names.insert(a.model_name).second) Fail(where, ": duplicate model_name");
    a.model_path = GetString(e, "model_path", where);
    if (a.model_path.empty()) Fail(where, ": field 'model_path' is empty");

    const bool camel = e.contains("extraArgs") && !e["extraArgs"].is_null();
    const bool snake = e.contains("extra_args") && !e["extra_args"].is_null();
    if (camel && snake) Fail(where, ": give 'extraArgs' or 'extra_args', not both");
    a.extra_args = JoinedStrings(e, camel ? "extraArgs" : "extra_args", " ", where);
    a.env = ParseEnvText(JoinedStrings(e, "env_vars", "\n", where), StrCat(where, ": field 'env_vars'"));
    a.runner = GetString(e, "runner", where, "");
    if (auto it = e.find("test_level"); it != e.end() && !it->is_null()) {
      if (it->is_string()) {
        a.test_level = it->get<std::string>();
      } else if (it->is_number_integer()) {
        a.test_level = std::to_string(it->get<std::int64_t>());
      } else {
        Fail(where, ": field 'test_level' must be a string or an integer, got ", it->dump());
      }
    }

    const bool t1 = e.contains("accuracy_threshold") && !e["accuracy_threshold"].is_null();
    const bool t2 = e.contains("accuracy_test_threshold") && !e["accuracy_test_threshold"].is_null();
    if (t1 && t2) Fail(where, ": give 'accuracy_threshold' or 'accuracy_test_threshold', not both");
    if (!t1 && !t2) Fail(where, ": missing 'accuracy_threshold' (or 'accuracy_test_threshold')");
    a.threshold_field = t1 ? "accuracy_threshold" : "accuracy_test_threshold";
    const Json& t = e[a.threshold_field];
    if (!t.is_number() || !std::isfinite(t.get<double>()) || t.get<double>() < 0 || t.get<double>() > 1) {
      Fail(where, ": field '", a.threshold_field, "' must be a number in [0, 1], got ", t.dump());
    }
    a.threshold = t.get<double>();

    for (auto kv = e.begin(); kv != e.end(); ++kv) {
      if (KnownKeys().count(kv.key())) continue;
      a.unknown[kv.key()] = kv.value();
      catalog.warnings.push_back(StrCat(where, ": unknown key '", kv.key(), "' kept"));
    }
    catalog.entries.push_back(std::move(a));
  }
  return catalog;
}

AccuracyCatalog LoadAccuracyCatalog(const std::string& path) {
  if (!FileExists(path)) Fail("accuracy catalog file '", path, "' does not exist");
  return ParseAccuracyCatalog(ReadJsonFile(path), path);
}

double FlexibleExtractScore(const Json& doc, const std::string& where) {
  if (!doc.is_object()) Fail(where, ": eval results must be a JSON object");
  if (auto r = doc.find("results"); r != doc.end() && r->is_object()) {
    if (auto g = r->find("gsm8k"); g != r->end()) {
      if (const Json* v = FindScoreIn(*g)) return v->get<double>();
    }
    for (auto kv = r->begin(); kv != r->end(); ++kv) {
      if (const Json* v = FindScoreIn(kv.value())) return v->get<double>();
    }
  }
  if (const Json* v = FindScoreIn(doc)) return v->get<double>();
  Fail(where, ": no 'exact_match,flexible-extract' score in the eval results");
}

Json ReadEvalOutput(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return ReadJsonFile(path);
  // lm-eval writes --output_path X.json as X_<date>.json beside it.
  const fs::path given(path);
  const bool dated = given.extension() == ".json" && fs::is_directory(given.parent_path().empty() ? "." : given.parent_path(), ec);
  if (!dated && !fs::is_directory(path, ec)) Fail("eval output '", path, "' was not written");
  const fs::path dir = dated ? (given.parent_path().empty() ? fs::path(".") : given.parent_path()) : given;
  const std::string prefix = dated ? given.stem().string() + "_" : "";
  fs::path newest;
  fs::file_time_type newest_time{};
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    if (dated && (e.path().parent_path() != dir || e.path().filename().string().rfind(prefix, 0) != 0)) continue;
    const auto t = e.last_write_time();
    if (newest.empty() || t > newest_time || (t == newest_time && e.path() > newest)) {
      newest = e.path();
      newest_time = t;
    }
  }
  if (newest.empty()) {
    if (dated) Fail("eval output '", path, "' was not written (nor ", prefix, "<date>.json beside it)");
    Fail("eval output directory '", path, "' holds no JSON file");
  }
  return ReadJsonFile(newest.string());
}

int RunAccuracy(const std::vector<const AccuracyEntry*>& entries, const AccuracyOptions& options, std::ostream& out,
                std::ostream& progress) {
  FISSION_CHECK(!options.out_dir.empty());
  const fs::path out_dir = fs::absolute(options.out_dir);
  const fs::path eval_dir = out_dir / "eval";
  const fs::path log_dir = out_dir / "logs";
  const std::string fission = options.fission_bin.empty() ? SelfExecutable() : options.fission_bin;
  if (!options.model_override_args.empty()) ParseJson(options.model_override_args, "--model-override-args");

  struct Planned {
    const AccuracyEntry* entry;
    int port;
    std::string server_cmd, eval_cmd, output;
  };
  std::vector<Planned> plan;
  for (const AccuracyEntry* e : entries) {
    ModelEntry as_model;
    as_model.index = e->index;
    as_model.prefix = e->model_name;
    as_model.path = e->model_path;
    const std::string path = ResolveModelPath(as_model, options.models_root);
    std::string args = e->extra_args;
    if (!options.model_override_args.empty()) {
      args += (args.empty() ? "" : " ") + std::string("--json-model-override-args ") +
              ShellQuote(options.model_override_args);
    }
    const int port = options.port > 0 ? options.port : (options.dry_run ? 30000 : PickFreePort());
    const std::string output = (eval_dir / (SafeName(e->model_name) + ".json")).string();
    const TemplateVars server_vars = {{"fission", {fission}}, {"path", {path}},          {"model", {path}},
                                      {"prefix", {e->model_name}}, {"server_args", {args, true}},
                                      {"host", {"127.0.0.1"}}, {"port", {std::to_string(port)}}};
    const TemplateVars eval_vars = {{"fission", {fission}},
                                    {"path", {path}},
                                    {"model", {path}},
                                    {"model_name", {e->model_name}},
                                    {"port", {std::to_string(port)}},
                                    {"base_url", {StrCat("http://127.0.0.1:", port)}},
                                    {"output", {output}}};
    plan.push_back({e, port, ExpandTemplate(options.server_cmd, server_vars, "--server-cmd"),
                    ExpandTemplate(options.eval_cmd, eval_vars, "--eval-cmd"), output});
  }

  if (options.dry_run) {
    for (const Planned& p : plan) {
      out << "# " << p.entry->model_name << " (threshold " << p.entry->threshold << ")\nenv:";
      for (const EnvVar& v : p.entry->env) out << " " << v.name << "=" << ShellQuote(v.value);
      out << "\nserver: " << p.server_cmd << "\neval: " << p.eval_cmd << "\n";
    }
    return 0;
  }

  fs::create_directories(eval_dir);
  fs::create_directories(log_dir);
  Json summary = Json::array();
  int bad = 0;
  for (size_t i = 0; i < plan.size() && !StopRequested().load(); ++i) {
    const Planned& p = plan[i];
    const std::string name = SafeName(p.entry->model_name);
    const std::string server_log = (log_dir / (name + "-server.log")).string();
    const std::string eval_log = (log_dir / (name + "-eval.log")).string();
    Json record{{"model_name", p.entry->model_name}, {"threshold", p.entry->threshold},
                {"server_command", p.server_cmd},    {"eval_command", p.eval_cmd}};
    progress << "[" << i + 1 << "/" << plan.size() << "] " << p.entry->model_name << ": starting server\n" << std::flush;
    std::error_code ec;
    fs::remove_all(p.output, ec);
    std::string error;
    std::string tail_of = server_log;
    std::unique_ptr<Subprocess> server = StartServer(
        {p.server_cmd, p.entry->env, server_log, p.port, options.health_timeout_s, options.stop_timeout_s}, &error);
    if (server) {
      tail_of = eval_log;
      Subprocess eval(p.eval_cmd, {}, eval_log);
      const std::optional<int> code =
          eval.Wait(std::chrono::milliseconds(static_cast<std::int64_t>(options.eval_timeout_s * 1000)), &StopRequested());
      if (!code) {
        eval.Stop(std::chrono::milliseconds(static_cast<std::int64_t>(options.stop_timeout_s * 1000)));
        error = StopRequested().load() ? "stopped by a signal" : StrCat("eval timed out after ", options.eval_timeout_s, " s");
      } else if (*code != 0) {
        error = StrCat("eval exited with code ", *code);
      } else {
        try {
          const double score = FlexibleExtractScore(ReadEvalOutput(p.output), p.output);
          record["score"] = score;
          record["status"] = score >= p.entry->threshold ? "pass" : "fail";
        } catch (const Error& e) {
          error = e.what();
        }
      }
      server->Stop(std::chrono::milliseconds(static_cast<std::int64_t>(options.stop_timeout_s * 1000)));
    }
    if (!error.empty()) {
      record["status"] = "error";
      record["error"] = error;
      record["log_tail"] = TailFile(tail_of, options.log_tail_lines);
    }
    if (record["status"] != "pass") ++bad;
    progress << "[" << i + 1 << "/" << plan.size() << "] " << p.entry->model_name << ": " << record["status"].get<std::string>();
    if (record.contains("score")) progress << " (flexible-extract " << record["score"].get<double>() << " vs threshold " << p.entry->threshold << ")";
    if (!error.empty()) progress << " (" << error << ")";
    progress << "\n" << std::flush;
    summary.push_back(record);
    std::ofstream(out_dir / "accuracy.json") << summary.dump(2) << "\n";
  }
  std::ofstream(out_dir / "accuracy.json") << summary.dump(2) << "\n";
  out << "| Model | Threshold | flexible-extract | Status |\n|---|---:|---:|---|\n";
  for (const Json& r : summary) {
    out << "| " << r["model_name"].get<std::string>() << " | " << r["threshold"].get<double>() << " | "
        << (r.contains("score") ? std::to_string(r["score"].get<double>()) : "-") << " | "
        << r["status"].get<std::string>() << " |\n";
  }
  if (StopRequested().load()) return 130;
  return bad > 0 ? 1 : 0;
}

}  // namespace fission::catalog
