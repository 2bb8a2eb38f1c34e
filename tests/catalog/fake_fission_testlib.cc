// The fake `fission serve|bench|eval` the end-to-end tests run (catalog_testlib.h). It takes over the
// test executable before main() when FISSION_CATALOG_FAKE=1 and the first argument names a role.
//
// serve  --model-path P --port N [flags]: records its argv, environment and pids to
//        $FISSION_CATALOG_FAKE_DIR/servers.jsonl, starts a worker child (same process group), answers
//        GET /health with 200 on 127.0.0.1:N until SIGTERM. Flags in the server args change it:
//        --fake-exit-at-start (exit 3 at once), --fake-ignore-sigterm (server and worker ignore
//        SIGTERM), --fake-health-503 (never healthy).
// bench  the sglang.bench_serving flags: checks /health, records its argv to bench.jsonl, appends a
//        result line to {result-dir}/{result-filename} whose metrics follow from the workload (scaled
//        by $FISSION_CATALOG_FAKE_SCALE), or fails when its result name is listed in
//        $FISSION_CATALOG_FAKE_FAIL; $FISSION_CATALOG_FAKE_BENCH_SECONDS makes it take that long.
// eval   --base-url U --output-path P: writes lm-eval style results with flexible-extract
//        $FISSION_CATALOG_FAKE_SCORE (default 0.9).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "catalog/process.h"

namespace fission::catalog {
namespace {

volatile std::sig_atomic_t g_terminate = 0;

std::vector<std::string> CommandLine() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(f, arg, '\0')) args.push_back(arg);
  return args;
}

std::string Flag(const std::vector<std::string>& args, const std::string& name, const std::string& fallback = "") {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == name) return args[i + 1];
  }
  return fallback;
}

bool Has(const std::vector<std::string>& args, const std::string& name) {
  for (const std::string& a : args) {
    if (a == name) return true;
  }
  return false;
}

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

void AppendLine(const std::string& path, const Json& j) {
  std::ofstream(path, std::ios::app) << j.dump() << "\n";
}

int PortOf(const std::string& base_url) {
  const size_t colon = base_url.rfind(':');
  return colon == std::string::npos ? 0 : std::atoi(base_url.c_str() + colon + 1);
}

int Serve(const std::vector<std::string>& args) {
  const int port = std::atoi(Flag(args, "--port").c_str());
  if (Has(args, "--fake-exit-at-start")) {
    std::fprintf(stderr, "fake server: refusing to start (--fake-exit-at-start)\n");
    return 3;
  }
  const bool ignore_term = Has(args, "--fake-ignore-sigterm");
  if (ignore_term) {
    std::signal(SIGTERM, SIG_IGN);
  } else {
    std::signal(SIGTERM, [](int) { g_terminate = 1; });
  }
  const pid_t worker = ::fork();
  if (worker == 0) {
    if (!ignore_term) std::signal(SIGTERM, SIG_DFL);
    while (true) ::pause();
  }
  Json env = Json::object();
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (kv.rfind("CATALOG_", 0) == 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  AppendLine(Env("FISSION_CATALOG_FAKE_DIR") + "/servers.jsonl",
             {{"pid", ::getpid()}, {"worker_pid", worker}, {"argv", args}, {"env", env}});

  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    std::fprintf(stderr, "fake server: cannot listen on port %d\n", port);
    return 4;
  }
  std::fprintf(stderr, "fake server: listening on 127.0.0.1:%d, model %s\n", port, Flag(args, "--model-path").c_str());
  const int status = Has(args, "--fake-health-503") ? 503 : 200;
  while (!g_terminate) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) != 1) continue;
    const int c = ::accept(fd, nullptr, nullptr);
    if (c < 0) continue;
    char buf[2048];
    pollfd q{c, POLLIN, 0};
    std::string request;
    if (::poll(&q, 1, 2000) == 1) {
      const ssize_t n = ::recv(c, buf, sizeof(buf), 0);
      if (n > 0) request.assign(buf, static_cast<size_t>(n));
    }
    const bool health = request.rfind("GET /health ", 0) == 0;
    const int code = health ? status : 404;
    const std::string response = "HTTP/1.1 " + std::to_string(code) + " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    ::send(c, response.data(), response.size(), MSG_NOSIGNAL);
    ::close(c);
  }
  std::fprintf(stderr, "fake server: SIGTERM, shutting down\n");
  return 0;
}

int Bench(const std::vector<std::string>& args) {
  const std::string base_url = Flag(args, "--base-url");
  const int port = PortOf(base_url);
  if (!HttpGetOk(port, "/health", std::chrono::milliseconds(5000))) {
    std::fprintf(stderr, "fake bench: server at %s is not healthy\n", base_url.c_str());
    return 5;
  }
  AppendLine(Env("FISSION_CATALOG_FAKE_DIR") + "/bench.jsonl", {{"pid", ::getpid()}, {"argv", args}});
  if (const double pause_s = std::atof(Env("FISSION_CATALOG_FAKE_BENCH_SECONDS", "0").c_str()); pause_s > 0) {
    std::fprintf(stderr, "fake bench: running for %.1f s\n", pause_s);
    ::usleep(static_cast<useconds_t>(pause_s * 1e6));
  }
  const std::string file = Flag(args, "--result-filename");
  const std::string name = file.substr(0, file.rfind(".json"));
  const std::string fail = "," + Env("FISSION_CATALOG_FAKE_FAIL") + ",";
  if (fail.find("," + name + ",") != std::string::npos) {
    std::fprintf(stderr, "fake bench: simulated failure for %s\n", name.c_str());
    return 1;
  }
  const double conc = std::atof(Flag(args, "--max-concurrency").c_str());
  const double isl = std::atof(Flag(args, "--random-input-len").c_str());
  const double osl = std::atof(Flag(args, "--random-output-len").c_str());
  const int prompts = std::atoi(Flag(args, "--num-prompts").c_str());
  const double scale = std::atof(Env("FISSION_CATALOG_FAKE_SCALE", "1").c_str());
  const double tpot = (4.0 + 0.25 * conc) / scale;
  const double ttft = (15.0 + 0.01 * isl * std::sqrt(conc)) / scale;
  const double duration = prompts * (ttft + tpot * osl) / 1000.0 / conc;
  const double output_throughput = prompts * osl / duration;
  Json r = {{"backend", Flag(args, "--backend")},
            {"dataset_name", Flag(args, "--dataset-name")},
            {"max_concurrency", static_cast<int>(conc)},
            {"random_input_len", static_cast<int>(isl)},
            {"random_output_len", static_cast<int>(osl)},
            {"random_range_ratio", std::atof(Flag(args, "--random-range-ratio").c_str())},
            {"duration", duration},
            {"completed", prompts},
            {"total_input_tokens", static_cast<int>(prompts * isl)},
            {"total_output_tokens", static_cast<int>(prompts * osl)},
            {"request_throughput", prompts / duration},
            {"input_throughput", prompts * isl / duration},
            {"output_throughput", output_throughput},
            {"total_token_throughput", prompts * (isl + osl) / duration},
            {"mean_ttft_ms", ttft * 1.05},
            {"median_ttft_ms", ttft},
            {"p99_ttft_ms", ttft * 1.6},
            {"mean_tpot_ms", tpot * 1.02},
            {"median_tpot_ms", tpot},
            {"p99_tpot_ms", tpot * 1.3},
            {"mean_itl_ms", tpot * 1.02},
            {"median_itl_ms", tpot},
            {"p99_itl_ms", tpot * 2.0},
            {"mean_e2e_latency_ms", ttft + tpot * osl}};
  // Like the reference client: the unlimited request rate is written as a bare Infinity, and the
  // result is appended as one line.
  std::string line = r.dump();
  line.insert(1, "\"request_rate\": Infinity, ");
  const std::string path = Flag(args, "--result-dir") + "/" + file;
  std::ofstream(path, std::ios::app) << line << "\n";
  std::printf("fake bench: %s done, output throughput %.1f tok/s\n", name.c_str(), output_throughput);
  return 0;
}

int Eval(const std::vector<std::string>& args) {
  if (!HttpGetOk(PortOf(Flag(args, "--base-url")), "/health", std::chrono::milliseconds(5000))) {
    std::fprintf(stderr, "fake eval: server is not healthy\n");
    return 5;
  }
  const double score = std::atof(Env("FISSION_CATALOG_FAKE_SCORE", "0.9").c_str());
  Json r = {{"results",
             {{"gsm8k",
               {{"alias", "gsm8k"}, {"exact_match,strict-match", score - 0.01}, {"exact_match,flexible-extract", score}}}}},
            {"config", {{"model", Flag(args, "--model")}}}};
  std::ofstream(Flag(args, "--output-path")) << r.dump(2) << "\n";
  std::printf("fake eval: flexible-extract %.3f\n", score);
  return 0;
}

int MaybeRunFake() {
  if (Env("FISSION_CATALOG_FAKE") != "1") return 0;
  const std::vector<std::string> args = CommandLine();
  if (args.size() < 2) return 0;
  int code = -1;
  if (args[1] == "serve") code = Serve(args);
  if (args[1] == "bench") code = Bench(args);
  if (args[1] == "eval") code = Eval(args);
  if (code < 0) return 0;
  std::fflush(stdout);
  std::fflush(stderr);
  ::_exit(code);
}

[[maybe_unused]] const int kFakeRan = MaybeRunFake();

}  // namespace
}  // namespace fission::catalog
