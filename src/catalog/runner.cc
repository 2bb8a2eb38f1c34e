#include "catalog/runner.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "base/mapped_file.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds Ms(double seconds) { return milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000))); }

std::string NowIso() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string EnvLine(const std::vector<EnvVar>& env) {
  std::string out;
  for (const EnvVar& v : env) out += (out.empty() ? "" : " ") + v.name + "=" + ShellQuote(v.value);
  return out;
}

Json EnvJson(const std::vector<EnvVar>& env) {
  Json out = Json::object();
  for (const EnvVar& v : env) out[v.name] = v.value;
  return out;
}

struct Group {
  size_t first = 0;
  size_t count = 0;
};

std::vector<Group> GroupCells(const std::vector<Cell>& cells, const std::string& override_args) {
  std::vector<Group> groups;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!groups.empty()) {
      const Cell& prev = cells[groups.back().first];
      if (prev.model == cells[i].model && ServerArgs(prev, override_args) == ServerArgs(cells[i], override_args) &&
          prev.env == cells[i].env) {
        ++groups.back().count;
        continue;
      }
    }
    groups.push_back({i, 1});
  }
  return groups;
}

Json CellRecord(const Cell& c) {
  const ModelEntry& m = *c.model;
  return Json{{"name", c.name},
              {"prefix", m.prefix},
              {"display", m.display},
              {"dashboard_model", m.dashboard_model},
              {"workload_label", m.workload_label},
              {"isl", c.workload.isl},
              {"osl", c.workload.osl},
              {"concurrency", c.workload.concurrency},
              {"ratio", c.workload.ratio},
              {"num_prompts", c.num_prompts},
              {"num_warmups", c.num_warmups},
              {"server_args", c.server_args},
              {"env", EnvJson(c.env)},
              {"serve_refusal", c.serve_refusal.empty() ? Json(nullptr) : Json(c.serve_refusal)},
              {"status", "pending"}};
}

void WriteManifest(const std::string& out_dir, const Json& manifest) {
  const fs::path tmp = fs::path(out_dir) / "manifest.json.tmp";
  {
    std::ofstream f(tmp);
    if (!f) Fail("cannot write '", tmp.string(), "'");
    f << manifest.dump(2) << "\n";
  }
  fs::rename(tmp, fs::path(out_dir) / "manifest.json");
}

void MarkFailed(Json& record, const std::string& error, const std::string& log_tail) {
  record["status"] = "failed";
  record["error"] = error;
  record["log_tail"] = log_tail;
}

std::string Seconds(Clock::time_point start) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << std::chrono::duration<double>(Clock::now() - start).count() << " s";
  return s.str();
}

}  // namespace

std::string ResolveModelPath(const ModelEntry& entry, const std::string& models_root) {
  if (models_root.empty()) return entry.path;
  const fs::path p = fs::path(entry.path).is_absolute() ? fs::path(entry.path) : fs::path(models_root) / entry.path;
  std::error_code ec;
  if (!fs::exists(p, ec)) {
    Fail(entry.Where(), ": model path '", entry.path, "' not found: '", p.string(), "' does not exist (--models-root '",
         models_root, "')");
  }
  return p.string();
}

std::string ServerArgs(const Cell& cell, const std::string& model_override_args) {
  std::string args = cell.server_args;
  if (!model_override_args.empty()) {
    args += (args.empty() ? "" : " ") + std::string("--json-model-override-args ") + ShellQuote(model_override_args);
  }
  return args;
}

TemplateVars ServerTemplateVars(const Cell& cell, const std::string& fission, const std::string& model_path,
                                const std::string& model_override_args, int port) {
  return {
      {"fission", {fission}},
      {"path", {model_path}},
      {"model", {model_path}},
      {"prefix", {cell.model->prefix}},
      {"server_args", {ServerArgs(cell, model_override_args), true}},
      {"host", {"127.0.0.1"}},
      {"port", {std::to_string(port)}},
  };
}

std::unique_ptr<Subprocess> StartServer(const ServerLaunch& launch, std::string* error) {
  auto server = std::make_unique<Subprocess>(launch.command, launch.env, launch.log_path);
  const auto deadline = Clock::now() + Ms(launch.health_timeout_s);
  while (true) {
    if (!server->Running()) {
      *error = StrCat("server exited with code ", *server->exit_code(), " before answering /health");
      return nullptr;
    }
    if (HttpGetOk(launch.port, "/health", milliseconds(2000))) return server;
    if (StopRequested().load()) {
      *error = "stopped by a signal";
      server->Stop(Ms(launch.stop_timeout_s));
      return nullptr;
    }
    if (Clock::now() >= deadline) {
      *error = StrCat("server did not answer /health on port ", launch.port, " within ", launch.health_timeout_s, " s");
      server->Stop(Ms(launch.stop_timeout_s));
      return nullptr;
    }
    std::this_thread::sleep_for(milliseconds(250));
  }
}

// Python's json module writes non-finite floats as bare NaN / Infinity / -Infinity (the bench's
// request_rate is Infinity by default). They become null so the document parses.
std::string NullNonFinite(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const char* token : {"-Infinity", "Infinity", "NaN"}) {
      const size_t n = std::char_traits<char>::length(token);
      if (text.compare(i, n, token) == 0) {
        out += "null";
        i += n - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

Json ReadBenchResult(const std::string& path) {
  if (!FileExists(path)) Fail("result file '", path, "' was not written");
  const std::string text = NullNonFinite(ReadFile(path));
  try {
    return Json::parse(text);
  } catch (const Json::parse_error&) {
  }
  // JSON lines: the last non-empty line is the latest result.
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) Fail("result file '", path, "' is empty");
  size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return ParseJson(text.substr(begin, end - begin + 1), path);
}

int RunCells(const std::vector<Cell>& cells, const RunOptions& options, std::ostream& out, std::ostream& progress) {
  FISSION_CHECK(!options.out_dir.empty());
  const fs::path out_dir = fs::absolute(options.out_dir);
  const fs::path result_dir = out_dir / "results";
  const fs::path log_dir = out_dir / "logs";
  const std::string fission = options.fission_bin.empty() ? SelfExecutable() : options.fission_bin;

  // Everything that can be wrong with the input is found before anything starts.
  std::vector<std::string> model_paths;
  for (const Cell& c : cells) model_paths.push_back(ResolveModelPath(*c.model, options.models_root));
  if (!options.model_override_args.empty()) ParseJson(options.model_override_args, "--model-override-args");

  const std::vector<Group> groups = GroupCells(cells, options.model_override_args);
  Json manifest{{"created", NowIso()}, {"cells", Json::array()}};
  for (const Cell& c : cells) manifest["cells"].push_back(CellRecord(c));
  if (!options.dry_run) {
    fs::create_directories(result_dir);
    fs::create_directories(log_dir);
    WriteManifest(out_dir.string(), manifest);
  }

  int failed = 0;
  size_t done = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    const Cell& head = cells[group.first];
    const int port = options.port > 0 ? options.port : (options.dry_run ? 30000 : PickFreePort());
    const std::string path = model_paths[group.first];
    const std::string server_cmd = ExpandTemplate(
        options.server_cmd, ServerTemplateVars(head, fission, path, options.model_override_args, port), "--server-cmd");
    auto bench_command = [&](const Cell& c) {
      const TemplateVars vars = {
          {"fission", {fission}},
          {"path", {path}},
          {"model", {path}},
          {"prefix", {c.model->prefix}},
          {"port", {std::to_string(port)}},
          {"base_url", {StrCat("http://127.0.0.1:", port)}},
          {"isl", {std::to_string(c.workload.isl)}},
          {"osl", {std::to_string(c.workload.osl)}},
          {"ratio", {FormatRatio(c.workload.ratio)}},
          {"conc", {std::to_string(c.workload.concurrency)}},
          {"prompts", {std::to_string(c.num_prompts)}},
          {"warmups", {std::to_string(c.num_warmups)}},
          {"result_dir", {result_dir.string()}},
          {"name", {c.name}},
          {"bench_args", {c.model->bench_args, true}},
      };
      return ExpandTemplate(options.bench_cmd, vars, "--bench-cmd");
    };

    std::vector<std::string> bench_cmds;  // expanded before anything starts, so a bad template fails early
    for (size_t i = group.first; i < group.first + group.count; ++i) bench_cmds.push_back(bench_command(cells[i]));

    if (options.dry_run) {
      out << "# group " << g + 1 << "/" << groups.size() << ": " << head.model->prefix << " (" << group.count
          << " cells)\n";
      out << "env: " << EnvLine(head.env) << "\n";
      out << "server: " << server_cmd << "\n";
      if (!head.serve_refusal.empty()) out << "refused: fission serve would refuse this command: " << head.serve_refusal << "\n";
      for (size_t i = group.first; i < group.first + group.count; ++i) {
        out << "bench " << cells[i].name << ": " << bench_cmds[i - group.first] << "\n";
      }
      continue;
    }

    const std::string server_log = (log_dir / StrCat(head.model->prefix, "-group", g + 1, "-server.log")).string();
    progress << "[group " << g + 1 << "/" << groups.size() << "] " << head.model->prefix << ": starting server on port "
             << port << " (log " << server_log << ")\n"
             << std::flush;
    for (size_t i = group.first; i < group.first + group.count; ++i) {
      manifest["cells"][i]["server_command"] = server_cmd;
      manifest["cells"][i]["server_log"] = fs::relative(server_log, out_dir).string();
    }
    const auto server_start = Clock::now();
    std::string error;
    std::unique_ptr<Subprocess> server =
        StopRequested().load()
            ? nullptr
            : StartServer({server_cmd, head.env, server_log, port, options.health_timeout_s, options.stop_timeout_s},
                          &error);
    if (StopRequested().load()) break;
    if (!server) {
      const std::string tail = TailFile(server_log, options.log_tail_lines);
      for (size_t i = group.first; i < group.first + group.count; ++i) {
        MarkFailed(manifest["cells"][i], error, tail);
        ++failed;
        ++done;
        progress << "[" << done << "/" << cells.size() << "] " << cells[i].name << ": FAILED (" << error << ")\n";
      }
      WriteManifest(out_dir.string(), manifest);
      continue;
    }
    progress << "  server healthy after " << Seconds(server_start) << "\n" << std::flush;

    for (size_t i = group.first; i < group.first + group.count; ++i) {
      if (StopRequested().load()) break;
      const Cell& c = cells[i];
      Json& record = manifest["cells"][i];
      const std::string& cmd = bench_cmds[i - group.first];
      const fs::path result_file = result_dir / (c.name + ".json");
      const std::string bench_log = (log_dir / (c.name + "-bench.log")).string();
      record["bench_command"] = cmd;
      record["bench_log"] = fs::relative(bench_log, out_dir).string();
      std::error_code ec;
      fs::remove(result_file, ec);
      fs::remove(bench_log, ec);
      const auto start = Clock::now();
      std::string cell_error;
      if (!server->Running()) {
        cell_error = StrCat("server exited with code ", *server->exit_code());
      } else {
        Subprocess bench(cmd, {}, bench_log);
        std::optional<int> code = bench.Wait(Ms(options.cell_timeout_s), &StopRequested());
        if (!code) {
          bench.Stop(Ms(options.stop_timeout_s));
          cell_error = StopRequested().load() ? "stopped by a signal"
                                              : StrCat("bench timed out after ", options.cell_timeout_s, " s");
        } else if (*code != 0) {
          cell_error = StrCat("bench exited with code ", *code);
        } else {
          try {
            const Json result = ReadBenchResult(result_file.string());
            if (!result.is_object()) Fail("result file '", result_file.string(), "' is not a JSON object");
            const std::int64_t completed = GetInt(result, "completed", result_file.string(), 0);
            if (completed <= 0) Fail("no request completed (result '", result_file.string(), "')");
            record["result_file"] = fs::relative(result_file, out_dir).string();
            record["status"] = "ok";
          } catch (const Error& e) {
            cell_error = e.what();
          }
        }
      }
      record["seconds"] = std::chrono::duration<double>(Clock::now() - start).count();
      ++done;
      if (cell_error.empty()) {
        progress << "[" << done << "/" << cells.size() << "] " << c.name << ": ok (" << Seconds(start) << ")\n";
      } else {
        std::string tail = TailFile(bench_log, options.log_tail_lines);
        if (!server->Running()) tail += "--- server log ---\n" + TailFile(server_log, options.log_tail_lines);
        MarkFailed(record, cell_error, tail);
        ++failed;
        progress << "[" << done << "/" << cells.size() << "] " << c.name << ": FAILED (" << cell_error << ")\n";
      }
      progress << std::flush;
      WriteManifest(out_dir.string(), manifest);
    }
    const int code = server->Stop(Ms(options.stop_timeout_s));
    if (server->killed()) {
      progress << "  server ignored SIGTERM for " << options.stop_timeout_s << " s; killed\n" << std::flush;
    } else {
      progress << "  server stopped (exit code " << code << ")\n" << std::flush;
    }
    if (StopRequested().load()) break;
  }

  if (options.dry_run) return 0;
  int cancelled = 0;
  for (Json& record : manifest["cells"]) {
    if (record["status"] == "pending") {
      record["status"] = "cancelled";
      ++cancelled;
    }
  }
  manifest["finished"] = NowIso();
  manifest["summary"] = {{"ok", cells.size() - failed - cancelled}, {"failed", failed}, {"cancelled", cancelled}};
  WriteManifest(out_dir.string(), manifest);
  progress << "done: " << cells.size() - failed - cancelled << " ok, " << failed << " failed, " << cancelled
           << " cancelled; manifest " << (out_dir / "manifest.json").string() << "\n";
  if (cancelled > 0 || StopRequested().load()) return 130;
  return failed > 0 ? 1 : 0;
}

}  // namespace fission::catalog
