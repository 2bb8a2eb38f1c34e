// Command templates and child processes: quoting, placeholders, process groups, bounded waits, the
// SIGTERM-then-SIGKILL stop, and the loopback health probe.
#include "catalog/process.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/mapped_file.h"
#include "catalog/command_template.h"
#include "catalog/catalog_testlib.h"

namespace fission::catalog {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

TEST(CommandTemplateTest, QuotesValuesAndKeepsRawOnes) {
  const TemplateVars vars = {{"path", {"/models/My Model"}},
                             {"port", {"8000"}},
                             {"args", {"--a 1 --b '{\"x\": 2}'", true}},
                             {"q", {"it's"}}};
  EXPECT_EQ(ExpandTemplate("serve {path} {args} --port {port} {q}", vars, "t"),
            "serve '/models/My Model' --a 1 --b '{\"x\": 2}' --port 8000 'it'\\''s'");
  EXPECT_EQ(ExpandTemplate("echo {{literal}} {port}", vars, "t"), "echo {literal} 8000");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a-b_c/d.e:f=g@h%i+j,k"), "a-b_c/d.e:f=g@h%i+j,k");
}

TEST(CommandTemplateTest, Errors) {
  try {
    ExpandTemplate("run {nope}", {{"port", {"1"}}}, "--bench-cmd");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--bench-cmd: unknown placeholder {nope} (known: {port})"));
  }
  EXPECT_THROW(ExpandTemplate("run {port", {{"port", {"1"}}}, "t"), Error);
  EXPECT_THROW(ExpandTemplate("run }", {}, "t"), Error);
}

TEST(CommandTemplateTest, DefaultTemplatesUseOnlyKnownPlaceholders) {
  const TemplateVars server = {{"fission", {"f"}}, {"path", {"p"}}, {"server_args", {"--tp-size 2", true}},
                               {"port", {"9"}}};
  EXPECT_EQ(ExpandTemplate(kDefaultServerCommand, server, "server"),
            "f serve --model-path p --tp-size 2 --host 127.0.0.1 --port 9");
  const TemplateVars bench = {{"fission", {"f"}},   {"port", {"9"}},       {"path", {"p"}},
                              {"isl", {"1024"}},    {"osl", {"8"}},        {"ratio", {"0.8"}},
                              {"conc", {"4"}},      {"prompts", {"40"}},   {"warmups", {"8"}},
                              {"result_dir", {"r"}}, {"name", {"n-1"}},    {"bench_args", {"", true}}};
  EXPECT_EQ(ExpandTemplate(kDefaultBenchCommand, bench, "bench"),
            "f bench --backend sglang-oai --base-url http://127.0.0.1:9 --model p --dataset-name random "
            "--random-input-len 1024 --random-output-len 8 --random-range-ratio 0.8 --max-concurrency 4 "
            "--num-prompts 40 --num-warmups 8 --save-result --result-dir r --result-filename n-1.json ");
}

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("process"); }
  std::string Log() const { return dir_ + "/log.txt"; }
  std::string dir_;
};

TEST_F(ProcessTest, RunsWithEnvironmentAndCapturesOutput) {
  Subprocess p("echo out; echo err >&2; echo \"$CATALOG_X-$HOME_OVERRIDE\"; exit 7",
               {{"CATALOG_X", "x y"}, {"HOME_OVERRIDE", "1"}}, Log());
  EXPECT_EQ(p.Wait(milliseconds(10000)), 7);
  const std::string log = ReadFile(Log());
  EXPECT_THAT(log, HasSubstr("out\n"));
  EXPECT_THAT(log, HasSubstr("err\n"));
  EXPECT_THAT(log, HasSubstr("x y-1\n"));
  EXPECT_EQ(TailFile(Log(), 1), "x y-1\n");
}

TEST_F(ProcessTest, WaitIsBoundedAndStopKillsTheWholeGroup) {
  // The shell starts a background grandchild and records its pid, then waits.
  Subprocess p("sleep 300 & echo $! > " + dir_ + "/child.pid; wait", {}, Log());
  ASSERT_TRUE(WaitForFile(dir_ + "/child.pid", milliseconds(10000)));
  const int child = std::stoi(ReadFile(dir_ + "/child.pid"));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.Wait(milliseconds(200)), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
  EXPECT_TRUE(ProcessAlive(child));
  const int code = p.Stop(milliseconds(5000));
  EXPECT_EQ(code, 128 + SIGTERM);
  EXPECT_TRUE(WaitUntilDead(child, milliseconds(5000)));
}

TEST_F(ProcessTest, StopEscalatesToSigkill) {
  Subprocess p("trap '' TERM; echo ready; while true; do sleep 0.05; done", {}, Log());
  ASSERT_TRUE(WaitForText(Log(), "ready", milliseconds(10000)));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.Stop(milliseconds(300)), 128 + SIGKILL);
  EXPECT_TRUE(p.killed());
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(8000));
  EXPECT_FALSE(ProcessAlive(p.pid()));
}

TEST_F(ProcessTest, StopGivesTheWholeGroupItsGracePeriod) {
  // The shell leader dies on SIGTERM at once; the process it started needs a moment to shut down and
  // must get it rather than an immediate SIGKILL.
  const std::string done = dir_ + "/done.txt";
  Subprocess p("(trap 'sleep 0.3; echo child-done > " + done + "; exit 0' TERM; echo ready; "
               "while true; do sleep 0.05; done) & wait",
               {}, Log());
  ASSERT_TRUE(WaitForText(Log(), "ready", milliseconds(10000)));
  p.Stop(milliseconds(10000));
  EXPECT_FALSE(p.killed());
  EXPECT_TRUE(WaitForText(done, "child-done", milliseconds(100)));
}

TEST_F(ProcessTest, LeftoversOfAFinishedLeaderAreSwept) {
  Subprocess p("sleep 300 & echo $! > " + dir_ + "/child.pid; exit 0", {}, Log());
  EXPECT_EQ(p.Wait(milliseconds(10000)), 0);
  const int child = std::stoi(ReadFile(dir_ + "/child.pid"));
  EXPECT_TRUE(WaitUntilDead(child, milliseconds(5000)));
}

TEST_F(ProcessTest, DestructorStopsARunningGroup) {
  int pid = 0;
  {
    Subprocess p("sleep 300", {}, Log());
    pid = p.pid();
    EXPECT_TRUE(p.Running());
  }
  EXPECT_FALSE(ProcessAlive(pid));
}

TEST_F(ProcessTest, WaitReturnsEarlyOnCancel) {
  Subprocess p("sleep 300", {}, Log());
  std::atomic<bool> cancel{true};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(p.Wait(milliseconds(60000), &cancel), std::nullopt);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(5000));
}

TEST_F(ProcessTest, HealthProbeOnLoopback) {
  const int port = PickFreePort();
  EXPECT_GT(port, 0);
  // Nothing listens yet.
  EXPECT_FALSE(HttpGetOk(port, "/health", milliseconds(500)));
  FakeHttpServer ok(200);
  EXPECT_TRUE(HttpGetOk(ok.port(), "/health", milliseconds(5000)));
  EXPECT_EQ(ok.last_path(), "/health");
  FakeHttpServer unavailable(503);
  EXPECT_FALSE(HttpGetOk(unavailable.port(), "/health", milliseconds(5000)));
}

TEST_F(ProcessTest, UnwritableLogIsAnError) {
  EXPECT_THROW(Subprocess("true", {}, "/nonexistent-dir/log"), Error);
}

}  // namespace
}  // namespace fission::catalog
