// End to end: `fission catalog run` with the default command templates against the fake
// `fission serve` / `fission bench` (catalog_testlib.h), then `fission catalog report` with a baseline,
// then the dashboard opened in headless Chromium.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "base/json.h"
#include "base/mapped_file.h"
#include "catalog/catalog_testlib.h"
#include "catalog/command_template.h"
#include "catalog/process.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::milliseconds;

constexpr const char* kCatalog = R"({
  "templates": {
    "extra_args": {"tp1": "--tp-size 1", "tp2": "--tp-size 2"},
    "env_vars": {"flag": "CATALOG_TEST_FLAG=on"}
  },
  "models": [
    {"prefix": "tiny-tp1", "display": "Tiny TP1", "path": "tiny-tp1",
     "extra_args": ["tp1", "--disable-radix-cache"], "env_vars": "flag"},
    {"prefix": "tiny-tp2", "display": "Tiny TP2", "path": "tiny-tp2",
     "extra_args": "tp2", "env_vars": ["flag", "CATALOG_TEST_TP=2"], "bench_args": "--seed 7",
     "case_extra_args_by_pair": {"128x8": "--chunked-prefill-size 64"},
     "case_env_vars_by_pair": {"128x8": "CATALOG_TEST_LONG=1"}}
  ]
})";
constexpr const char* kGrid = "64,16,1,1;64,16,2,1;64,16,4,1;128,8,2,0.5";
constexpr const char* kOverride = R"({"num_hidden_layers": 2})";

std::string Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

std::vector<Json> JsonLines(const std::string& path) {
  std::vector<Json> out;
  for (const std::string& l : ReadLines(path)) out.push_back(Json::parse(l));
  return out;
}

bool Contains(const Json& argv, const std::vector<std::string>& seq) {
  const std::vector<std::string> a = argv.get<std::vector<std::string>>();
  return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
}

class CatalogRunTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = MakeTempDir("e2e");
    fs::create_directories(dir_ + "/models/tiny-tp1");
    fs::create_directories(dir_ + "/models/tiny-tp2");
    fs::create_directories(dir_ + "/fake");
    catalog_ = Write(dir_ + "/catalog.json", kCatalog);
    env_ = {{"FISSION_CATALOG_FAKE", "1"},
            {"FISSION_CATALOG_FAKE_DIR", dir_ + "/fake"},
            {"FISSION_CATALOG_FAKE_FAIL", "tiny-tp2-64-16-2-1"}};
    run_ = RunFission({"catalog", "run", catalog_, "--out", dir_ + "/run", "--fission-bin", TestExecutable(),
                       "--models-root", dir_ + "/models", "--param-lists", kGrid, "--model-override-args", kOverride,
                       "--health-timeout", "30", "--stop-timeout", "5", "--cell-timeout", "60"},
                      env_);
  }

  static Json Manifest() { return ReadJsonFile(dir_ + "/run/manifest.json"); }
  static const Json* Cell(const Json& manifest, const std::string& name) {
    for (const Json& c : manifest["cells"]) {
      if (c["name"] == name) return &c;
    }
    return nullptr;
  }

  static inline std::string dir_;
  static inline std::string catalog_;
  static inline std::map<std::string, std::string> env_;
  static inline CommandResult run_;
};

TEST_F(CatalogRunTest, RunsEveryCellAndReportsTheFailedOne) {
  EXPECT_EQ(run_.code, 1) << run_.output;  // one cell failed, the rest ran
  EXPECT_THAT(run_.output, HasSubstr("catalog " + catalog_ + ": 8 cells"));
  EXPECT_THAT(run_.output, HasSubstr("[1/8] tiny-tp1-64-16-1-1: ok"));
  EXPECT_THAT(run_.output, HasSubstr("tiny-tp2-64-16-2-1: FAILED (bench exited with code 1)"));
  EXPECT_THAT(run_.output, HasSubstr("[8/8] tiny-tp2-128-8-2-0.5: ok"));
  EXPECT_THAT(run_.output, HasSubstr("done: 7 ok, 1 failed, 0 cancelled"));
}

TEST_F(CatalogRunTest, ManifestAndResults) {
  const Json m = Manifest();
  ASSERT_EQ(m["cells"].size(), 8u);
  EXPECT_EQ(m["summary"]["ok"], 7);
  EXPECT_EQ(m["summary"]["failed"], 1);
  for (const Json& c : m["cells"]) {
    const std::string name = c["name"];
    if (name == "tiny-tp2-64-16-2-1") {
      EXPECT_EQ(c["status"], "failed");
      EXPECT_EQ(c["error"], "bench exited with code 1");
      EXPECT_THAT(c["log_tail"].get<std::string>(), HasSubstr("fake bench: simulated failure for tiny-tp2-64-16-2-1"));
      continue;
    }
    EXPECT_EQ(c["status"], "ok") << name;
    const std::string result_path = dir_ + "/run/" + c["result_file"].get<std::string>();
    EXPECT_EQ(result_path, dir_ + "/run/results/" + name + ".json");
    ASSERT_TRUE(fs::exists(result_path)) << result_path;
    // The result keeps sglang.bench_serving's keys; the bare Infinity of request_rate is tolerated.
    EXPECT_THAT(ReadFile(result_path), HasSubstr("\"request_rate\": Infinity"));
    EXPECT_TRUE(fs::exists(dir_ + "/run/" + c["bench_log"].get<std::string>()));
    EXPECT_TRUE(fs::exists(dir_ + "/run/" + c["server_log"].get<std::string>()));
  }
  const Json* c = Cell(m, "tiny-tp2-128-8-2-0.5");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ((*c)["num_prompts"], 20);
  EXPECT_EQ((*c)["num_warmups"], 4);
  EXPECT_EQ((*c)["server_args"], "--tp-size 2 --chunked-prefill-size 64");
  EXPECT_EQ((*c)["env"]["CATALOG_TEST_LONG"], "1");
}

TEST_F(CatalogRunTest, ServersGetTheirArgumentsEnvironmentAndModelDirectory) {
  const std::vector<Json> servers = JsonLines(dir_ + "/fake/servers.jsonl");
  // tiny-tp1 (one group), tiny-tp2 64x16 and 128x8 (per-pair additions split the group).
  ASSERT_EQ(servers.size(), 3u);
  const Json& a = servers[0]["argv"];
  EXPECT_EQ(a[1], "serve");
  EXPECT_TRUE(Contains(a, {"--model-path", dir_ + "/models/tiny-tp1", "--tp-size", "1", "--disable-radix-cache",
                           "--json-model-override-args", kOverride, "--host", "127.0.0.1", "--port"}))
      << a.dump();
  EXPECT_EQ(servers[0]["env"]["CATALOG_TEST_FLAG"], "on");
  EXPECT_FALSE(servers[0]["env"].contains("CATALOG_TEST_TP"));
  EXPECT_TRUE(Contains(servers[1]["argv"], {"--model-path", dir_ + "/models/tiny-tp2", "--tp-size", "2",
                                            "--json-model-override-args"}));
  EXPECT_FALSE(Contains(servers[1]["argv"], {"--chunked-prefill-size"}));
  EXPECT_EQ(servers[1]["env"]["CATALOG_TEST_TP"], "2");
  EXPECT_FALSE(servers[1]["env"].contains("CATALOG_TEST_LONG"));
  EXPECT_TRUE(Contains(servers[2]["argv"], {"--tp-size", "2", "--chunked-prefill-size", "64"}));
  EXPECT_EQ(servers[2]["env"]["CATALOG_TEST_LONG"], "1");
}

TEST_F(CatalogRunTest, BenchGetsTheSglangBenchServingFlags) {
  const std::vector<Json> benches = JsonLines(dir_ + "/fake/bench.jsonl");
  ASSERT_EQ(benches.size(), 8u);
  const Json& b = benches[2]["argv"];  // tiny-tp1 64x16 at concurrency 4
  EXPECT_EQ(b[1], "bench");
  EXPECT_TRUE(Contains(b, {"--backend", "sglang-oai"}));
  EXPECT_TRUE(Contains(b, {"--model", dir_ + "/models/tiny-tp1"}));
  EXPECT_TRUE(Contains(b, {"--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "16",
                           "--random-range-ratio", "1", "--max-concurrency", "4", "--num-prompts", "40",
                           "--num-warmups", "8", "--save-result", "--result-dir", dir_ + "/run/results",
                           "--result-filename", "tiny-tp1-64-16-4-1.json"}))
      << b.dump();
  const Json& last = benches[7]["argv"];
  EXPECT_TRUE(Contains(last, {"--random-range-ratio", "0.5"}));
  EXPECT_TRUE(Contains(last, {"--seed", "7"}));  // bench_args
}

TEST_F(CatalogRunTest, NoProcessIsLeftBehind) {
  for (const Json& s : JsonLines(dir_ + "/fake/servers.jsonl")) {
    EXPECT_TRUE(WaitUntilDead(s["pid"].get<int>(), milliseconds(5000))) << s["pid"];
    EXPECT_TRUE(WaitUntilDead(s["worker_pid"].get<int>(), milliseconds(5000))) << s["worker_pid"];
  }
  for (const fs::path log : {"tiny-tp1-group1-server.log", "tiny-tp2-group2-server.log"}) {
    EXPECT_THAT(ReadFile(dir_ + "/run/logs/" + log.string()), HasSubstr("fake server: SIGTERM, shutting down"));
  }
}

TEST_F(CatalogRunTest, ReportMarksRegressionsAgainstABaseline) {
  // The baseline: the same run with one cell 20% faster and half the TTFT, another within noise.
  const std::string base = dir_ + "/baseline";
  fs::remove_all(base);
  fs::copy(dir_ + "/run", base, fs::copy_options::recursive);
  auto edit = [&](const std::string& name, double throughput_factor, double ttft_factor) {
    const std::string path = base + "/results/" + name + ".json";
    std::string text = ReadFile(path);
    text.replace(text.find("Infinity"), 8, "null");
    Json r = Json::parse(text);
    r["output_throughput"] = r["output_throughput"].get<double>() * throughput_factor;
    r["median_ttft_ms"] = r["median_ttft_ms"].get<double>() * ttft_factor;
    std::ofstream(path) << r.dump() << "\n";
  };
  edit("tiny-tp1-64-16-4-1", 1.2, 0.5);
  edit("tiny-tp1-64-16-2-1", 1.03, 0.95);

  const CommandResult r = RunFission({"catalog", "report", dir_ + "/run", "--baseline", base, "--out",
                                      dir_ + "/report", "--fail-on-regression"},
                                     {});
  EXPECT_EQ(r.code, 1) << r.output;
  const std::string md = ReadFile(dir_ + "/report/report.md");
  EXPECT_THAT(md, HasSubstr("- Regressions (throughput down > 5%, latency up > 10%): 2"));
  EXPECT_THAT(md, HasSubstr("| tiny-tp1-64-16-4-1 | throughput |"));
  EXPECT_THAT(md, HasSubstr("| tiny-tp1-64-16-4-1 | ttft |"));
  EXPECT_THAT(md, HasSubstr("throughput -16.7% **REGRESSION**"));
  EXPECT_THAT(md, HasSubstr("ttft +100.0% **REGRESSION**"));
  EXPECT_THAT(md, HasSubstr("throughput -2.9%, ttft +5.3%, tpot +0.0%, itl +0.0% |"));
  EXPECT_THAT(md, HasSubstr("### tiny-tp2-64-16-2-1 (failed)"));
  EXPECT_THAT(md, HasSubstr("fake bench: simulated failure"));

  const std::string html = ReadFile(dir_ + "/report/dashboard.html");
  EXPECT_THAT(html, HasSubstr("id=\"chart-tiny-tp1-64x16-r1-throughput\""));
  EXPECT_THAT(html, HasSubstr("data-regressions=\"1\""));
  EXPECT_THAT(html, HasSubstr("class=\"series baseline\""));
  EXPECT_THAT(html, HasSubstr("point current regression"));
  EXPECT_THAT(html, Not(HasSubstr("http://")));   // self-contained: nothing fetched
  EXPECT_THAT(html, Not(HasSubstr("https://")));

  // Without the flag a regression is reported but is not an error; without a baseline none is marked.
  EXPECT_EQ(RunFission({"catalog", "report", dir_ + "/run", "--baseline", base, "--out", dir_ + "/report2"}, {}).code, 0);
  const CommandResult plain = RunFission({"catalog", "report", dir_ + "/run"}, {});
  EXPECT_EQ(plain.code, 0) << plain.output;
  EXPECT_THAT(ReadFile(dir_ + "/run/report.md"), Not(HasSubstr("REGRESSION")));
  EXPECT_THAT(plain.output, HasSubstr("| 64 | 16 | 1 | 4 | ok |"));
}

// Headless Chromium loads the dashboard; its own script confirms every chart has a layout box and its
// points drawn, and a screenshot is kept under the build directory.
TEST_F(CatalogRunTest, DashboardRendersInHeadlessChromium) {
  std::string chromium;
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(c)) chromium = c;
  }
  ASSERT_FALSE(chromium.empty()) << "chromium is not installed (scripts/setup.sh installs the Debian package)";
  const std::string html = dir_ + "/run/dashboard.html";
  if (!fs::exists(html)) {
    ASSERT_EQ(RunFission({"catalog", "report", dir_ + "/run"}, {}).code, 0);
  }
  const std::string artifacts = std::string(FISSION_BINARY_DIR) + "/test-artifacts/catalog";
  fs::create_directories(artifacts);
  const std::string shot = artifacts + "/dashboard.png";
  fs::remove(shot);
  auto browser = [&](const std::string& profile, const std::string& action, const std::string& log) {
    const std::string cmd = ShellQuote(chromium) + " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                            "--disable-background-networking --disable-component-update --disable-sync "
                            "--virtual-time-budget=5000 --user-data-dir=" + ShellQuote(profile) + " " + action +
                            " " + ShellQuote("file://" + html);
    Subprocess p(cmd, {}, log);
    const std::optional<int> code = p.Wait(milliseconds(120000));
    if (!code) p.Stop(milliseconds(5000));
    return code.value_or(-1);
  };
  const std::string dom_log = dir_ + "/dom.html";
  ASSERT_EQ(browser(MakeTempDir("chromium-profile"), "--dump-dom", dom_log), 0) << ReadFile(dom_log);
  const std::string dom = ReadFile(dom_log);
  // 2 models x 2 workloads x 4 metrics.
  EXPECT_THAT(dom, HasSubstr("data-charts-total=\"16\""));
  EXPECT_THAT(dom, HasSubstr("data-charts-rendered=\"16\"")) << dom.substr(0, 2000);
  EXPECT_THAT(dom, HasSubstr("16 of 16 charts rendered"));
  std::smatch m;
  const std::regex rendered("data-rendered=\"true\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(dom.begin(), dom.end(), rendered), std::sregex_iterator()), 16);
  for (const char* metric : {"throughput", "ttft", "tpot", "itl"}) {
    EXPECT_THAT(dom, HasSubstr(std::string("id=\"chart-tiny-tp2-128x8-r0_5-") + metric + "\""));
  }

  const std::string shot_log = dir_ + "/screenshot.log";
  ASSERT_EQ(browser(MakeTempDir("chromium-profile"), "--window-size=1700,2200 --screenshot=" + ShellQuote(shot),
                    shot_log),
            0)
      << ReadFile(shot_log);
  ASSERT_TRUE(fs::exists(shot)) << ReadFile(shot_log);
  const std::string png = ReadFile(shot);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(png.size(), 20000u);  // a page of charts, not a blank image
}

TEST_F(CatalogRunTest, DryRunPrintsEveryCommandAndStartsNothing) {
  const std::string fake = MakeTempDir("dry-fake");
  std::map<std::string, std::string> env = env_;
  env["FISSION_CATALOG_FAKE_DIR"] = fake;
  const CommandResult r =
      RunFission({"catalog", "run", catalog_, "--dry-run", "--out", dir_ + "/dry", "--fission-bin", "/opt/fission",
                  "--models-root", dir_ + "/models", "--param-lists", kGrid, "--port", "31000"},
                 env);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("# group 1/3: tiny-tp1 (4 cells)"));
  EXPECT_THAT(r.output, HasSubstr("env: CATALOG_TEST_FLAG=on\n"));
  EXPECT_THAT(r.output, HasSubstr("server: /opt/fission serve --model-path " + dir_ +
                                      "/models/tiny-tp1 --tp-size 1 --disable-radix-cache --host 127.0.0.1 --port 31000"));
  EXPECT_THAT(r.output, HasSubstr("env: CATALOG_TEST_FLAG=on CATALOG_TEST_TP=2 CATALOG_TEST_LONG=1\n"));
  EXPECT_THAT(r.output, HasSubstr("bench tiny-tp2-128-8-2-0.5: /opt/fission bench --backend sglang-oai --base-url "
                                  "http://127.0.0.1:31000 --model " + dir_ + "/models/tiny-tp2"));
  EXPECT_THAT(r.output, HasSubstr("--num-prompts 20 --num-warmups 4 --save-result --result-dir " + dir_ +
                                  "/dry/results --result-filename tiny-tp2-128-8-2-0.5.json --seed 7"));
  size_t benches = 0;
  for (size_t at = r.output.find("\nbench "); at != std::string::npos; at = r.output.find("\nbench ", at + 1)) ++benches;
  EXPECT_EQ(benches, 8u);
  EXPECT_FALSE(fs::exists(fake + "/servers.jsonl"));
  EXPECT_FALSE(fs::exists(dir_ + "/dry/manifest.json"));
}

TEST_F(CatalogRunTest, CustomTemplatesAndServerFailures) {
  const std::string d = MakeTempDir("failures");
  fs::create_directories(d + "/fake");
  const std::string catalog = Write(d + "/catalog.json", R"([
    {"prefix": "refuses", "path": "m", "extra_args": "--fake-exit-at-start"},
    {"prefix": "unhealthy", "path": "m", "extra_args": "--fake-health-503"},
    {"prefix": "stubborn", "path": "m", "extra_args": "--fake-ignore-sigterm"},
    {"prefix": "fine", "path": "m"}])");
  std::map<std::string, std::string> env = {{"FISSION_CATALOG_FAKE", "1"}, {"FISSION_CATALOG_FAKE_DIR", d + "/fake"}};
  const std::string exe = ShellQuote(TestExecutable());
  const CommandResult r = RunFission(
      {"catalog", "run", catalog, "--out", d + "/run", "--param-lists", "32,4,2,1", "--health-timeout", "3",
       "--stop-timeout", "1", "--server-cmd", exe + " serve --model-path {path} {server_args} --port {port}",
       "--bench-cmd",
       exe + " bench --base-url {base_url} --max-concurrency {conc} --num-prompts {prompts} --random-input-len {isl} "
             "--random-output-len {osl} --random-range-ratio {ratio} --result-dir {result_dir} --result-filename "
             "{name}.json"},
      env);
  EXPECT_EQ(r.code, 1) << r.output;
  const Json m = ReadJsonFile(d + "/run/manifest.json");
  ASSERT_EQ(m["cells"].size(), 4u);
  EXPECT_EQ(m["cells"][0]["status"], "failed");
  EXPECT_EQ(m["cells"][0]["error"], "server exited with code 3 before answering /health");
  EXPECT_THAT(m["cells"][0]["log_tail"].get<std::string>(), HasSubstr("refusing to start"));
  EXPECT_EQ(m["cells"][1]["status"], "failed");
  EXPECT_THAT(m["cells"][1]["error"].get<std::string>(), HasSubstr("did not answer /health"));
  EXPECT_THAT(m["cells"][1]["log_tail"].get<std::string>(), HasSubstr("fake server: listening"));
  EXPECT_EQ(m["cells"][2]["status"], "ok");  // stopped with SIGKILL after the grace period
  EXPECT_EQ(m["cells"][3]["status"], "ok");
  EXPECT_THAT(r.output, HasSubstr("server ignored SIGTERM for 1 s; killed"));
  EXPECT_THAT(ReadFile(d + "/run/logs/fine-group4-server.log"), HasSubstr("fake server: SIGTERM, shutting down"));
  for (const std::string& line : ReadLines(d + "/fake/servers.jsonl")) {
    const Json s = Json::parse(line);
    EXPECT_TRUE(WaitUntilDead(s["pid"].get<int>(), milliseconds(5000)));
    EXPECT_TRUE(WaitUntilDead(s["worker_pid"].get<int>(), milliseconds(5000)));
  }
}

TEST_F(CatalogRunTest, InterruptStopsEverythingAndRecordsCancelledCells) {
  const std::string d = MakeTempDir("interrupt");
  fs::create_directories(d + "/fake");
  const std::string catalog = Write(d + "/catalog.json", R"([{"prefix": "slow", "path": "m"}])");
  const std::vector<EnvVar> env = {{"FISSION_CATALOG_FAKE", "1"},
                                   {"FISSION_CATALOG_FAKE_DIR", d + "/fake"},
                                   {"FISSION_CATALOG_FAKE_BENCH_SECONDS", "60"}};
  const std::string command = ShellQuote(FissionBinary()) + " catalog run " + ShellQuote(catalog) + " --out " +
                              ShellQuote(d + "/run") + " --fission-bin " + ShellQuote(TestExecutable()) +
                              " --param-lists '16,4,1,1;16,4,2,1' --health-timeout 30 --stop-timeout 5";
  Subprocess run("exec " + command, env, d + "/output.txt");
  ASSERT_TRUE(WaitForText(d + "/run/logs/slow-16-4-1-1-bench.log", "fake bench: running", milliseconds(30000)))
      << ReadFile(d + "/output.txt");
  ::kill(run.pid(), SIGINT);
  const std::optional<int> code = run.Wait(milliseconds(30000));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 130) << ReadFile(d + "/output.txt");
  const Json m = ReadJsonFile(d + "/run/manifest.json");
  EXPECT_EQ(m["cells"][0]["status"], "failed");
  EXPECT_EQ(m["cells"][0]["error"], "stopped by a signal");
  EXPECT_EQ(m["cells"][1]["status"], "cancelled");
  EXPECT_EQ(m["summary"]["cancelled"], 1);
  for (const char* file : {"/fake/servers.jsonl", "/fake/bench.jsonl"}) {
    for (const std::string& line : ReadLines(d + file)) {
      const Json p = Json::parse(line);
      EXPECT_TRUE(WaitUntilDead(p["pid"].get<int>(), milliseconds(5000))) << line;
      if (p.contains("worker_pid")) {
        EXPECT_TRUE(WaitUntilDead(p["worker_pid"].get<int>(), milliseconds(5000)));
      }
    }
  }
}

TEST_F(CatalogRunTest, InputErrorsExitWithCode2AndNameTheProblem) {
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"catalog", "run", catalog_, "--out", dir_ + "/err", "--dry-run"};
    args.insert(args.end(), extra.begin(), extra.end());
    return RunFission(args, {});
  };
  CommandResult r = run({"--models-root", dir_ + "/fake"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("entry 0 ('tiny-tp1'): model path 'tiny-tp1' not found"));
  r = run({"--bench-cmd", "bench {nope}"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--bench-cmd: unknown placeholder {nope}"));
  r = run({"--model-override-args", "{bad"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("--model-override-args: invalid JSON"));
  r = run({"--preset", "nothing-like-this"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown preset 'nothing-like-this'"));
  r = run({"--schedule", "someday"});
  EXPECT_EQ(r.code, 2);
  r = run({"--port", "70000"});
  EXPECT_EQ(r.code, 2);
  r = run({"--frobnicate"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("unknown option '--frobnicate'"));
  r = RunFission({"catalog", "run", dir_ + "/missing.json", "--out", dir_ + "/err"}, {});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("catalog file '" + dir_ + "/missing.json' does not exist"));
  r = RunFission({"catalog", "expand", Write(dir_ + "/dup.json", R"([{"prefix": "a", "path": "p"},
                                                                    {"prefix": "a", "path": "q"}])")},
                 {});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.output, HasSubstr("entry 1 ('a'): duplicate prefix"));
}

TEST_F(CatalogRunTest, ExpandAndListCommands) {
  const std::string fixture = FISSION_SOURCE_DIR "/tests/fixtures/catalog/catalog.json";
  CommandResult r = RunFission({"catalog", "expand", fixture, "--schedule", "fri", "--format", "json"}, {});
  ASSERT_EQ(r.code, 0) << r.output;
  const Json j = Json::parse(r.output);
  EXPECT_EQ(j["counts"]["cells"], 44);
  EXPECT_EQ(j["counts"]["per_model"]["ds-mesh-fp4-dp8ep8"], 22);
  EXPECT_EQ(j["cells"][0]["server_args"], "--tensor-parallel-size 8 --trust-remote-code --mem-fraction-static 0.8");
  r = RunFission({"catalog", "list", fixture, "--suite", "oob", "--preset", "all-qwen,glm-5-fp8"}, {});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("total: 2 models, 20 cells"));
  EXPECT_THAT(r.output, HasSubstr("all-deepseek-non-mtp  15"));
  r = RunFission({"catalog", "expand", fixture, "--schedule", "sun"}, {});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.output, HasSubstr("total: 0 models, 0 cells"));
}

}  // namespace
}  // namespace fission::catalog
