// `fission catalog run`: runs expanded cells. Consecutive cells of one entry that share server
// arguments and environment form a group; each group starts one server, waits for GET /health, runs
// the bench command once per cell, and stops the server. A cell that fails is recorded with the tail
// of its log and the run goes on. Everything is written under the output directory:
//   results/{name}.json   the bench result of each cell (sglang.bench_serving format)
//   logs/...              one log per server and per bench run
//   manifest.json         every cell: metadata, status, error, log tail, result file, commands
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "catalog/command_template.h"
#include "catalog/expansion.h"
#include "catalog/process.h"

namespace fission::catalog {

struct RunOptions {
  std::string out_dir;
  std::string server_cmd = kDefaultServerCommand;
  std::string bench_cmd = kDefaultBenchCommand;
  std::string fission_bin;          // {fission}; empty means this executable
  std::string models_root;          // maps an entry's `path` to models_root/path
  std::string model_override_args;  // JSON, passed to the server as --json-model-override-args
  int port = 0;                     // 0: a free loopback port per server
  double health_timeout_s = 900;
  double stop_timeout_s = 30;
  double cell_timeout_s = 3600;
  size_t log_tail_lines = 30;
  bool dry_run = false;
};

// The model path an entry's server gets: `path`, or models_root/path when a root is given; with a
// root the directory must exist, else an Error naming the entry.
std::string ResolveModelPath(const ModelEntry& entry, const std::string& models_root);

// The server arguments of a cell with --json-model-override-args appended when given.
std::string ServerArgs(const Cell& cell, const std::string& model_override_args);

// The placeholders of a server command for `cell`: {fission}, {path}/{model}, {prefix},
// {server_args} (with --json-model-override-args), {host} and {port}.
TemplateVars ServerTemplateVars(const Cell& cell, const std::string& fission, const std::string& model_path,
                                const std::string& model_override_args, int port);

// Starts a server and waits for it to answer GET /health. On failure returns null and sets `error`
// (the server is stopped by then).
struct ServerLaunch {
  std::string command;
  std::vector<EnvVar> env;
  std::string log_path;
  int port = 0;
  double health_timeout_s = 900;
  double stop_timeout_s = 30;
};
std::unique_ptr<Subprocess> StartServer(const ServerLaunch& launch, std::string* error);

// Replaces the bare NaN / Infinity / -Infinity tokens Python's json module writes (outside strings)
// with null.
std::string NullNonFinite(const std::string& text);

// Reads a bench result file: one JSON object, or JSON lines of which the last one counts (the bench
// appends). Errors name the file.
Json ReadBenchResult(const std::string& path);

// Runs `cells`; writes progress to `progress` and, with dry_run, every command and env to `out`
// (with the reason when `fission serve` would refuse a group's server command, serve_check.h).
// Returns 0 when every cell succeeded, 1 when any failed, 130 when stopped by a signal.
int RunCells(const std::vector<Cell>& cells, const RunOptions& options, std::ostream& out, std::ostream& progress);

}  // namespace fission::catalog
