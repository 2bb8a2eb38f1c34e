// Helpers for the catalog tests.
//
// The test executable doubles as a fake `fission` binary: started with FISSION_CATALOG_FAKE=1 and
// first argument `serve`, `bench` or `eval`, it behaves as a tiny server (GET /health on loopback),
// a bench client that writes an sglang.bench_serving-style result, or an eval that writes lm-eval
// style results (see fake_fission_testlib.cc). Tests pass it as `--fission-bin`, so `catalog run`
// uses its default command templates unchanged.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "catalog/catalog.h"

namespace fission::catalog {

// Parses catalog JSON text as the file "test.json".
Catalog ParseTestCatalog(const std::string& text);
// The error message that parsing `text` gives ("" when it parses).
std::string TestCatalogError(const std::string& text);

// A fresh empty directory under the build tree (kept after the test for inspection).
std::string MakeTempDir(const std::string& name);

bool WaitForFile(const std::string& path, std::chrono::milliseconds timeout);
bool WaitForText(const std::string& path, const std::string& text, std::chrono::milliseconds timeout);

// True while `pid` exists and is not a zombie.
bool ProcessAlive(int pid);
bool WaitUntilDead(int pid, std::chrono::milliseconds timeout);

struct CommandResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};
// Runs the built `fission` binary with `args` and extra environment; bounded by `timeout`.
CommandResult RunFission(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                         std::chrono::milliseconds timeout = std::chrono::milliseconds(120000));
std::string FissionBinary();
std::string TestExecutable();

// Reads a JSON-lines file into its lines' objects (as dumped strings parsed by the caller).
std::vector<std::string> ReadLines(const std::string& path);

// A loopback HTTP server answering every request with `status`, on its own thread.
class FakeHttpServer {
 public:
  explicit FakeHttpServer(int status);
  ~FakeHttpServer();
  int port() const { return port_; }
  std::string last_path() const;

 private:
  int fd_ = -1;
  int port_ = 0;
  int status_;
  std::thread thread_;
  struct State;
  State* state_;
};

}  // namespace fission::catalog
