// Report: loading runs (with and without a manifest), regression thresholds, markdown and dashboard
// structure, bench result files in JSON-lines form with non-finite numbers.
#include "catalog/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "catalog/catalog_testlib.h"
#include "catalog/dashboard.h"
#include "catalog/runner.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

CellOutcome MakeCell(const std::string& prefix, std::int64_t conc, double throughput, double ttft, double tpot = 5,
                     double itl = 5) {
  CellOutcome c;
  c.prefix = prefix;
  c.display = prefix + " display";
  c.workload_label = "SGLang-OOB";
  c.isl = 1024;
  c.osl = 1024;
  c.concurrency = conc;
  c.ratio = 0.8;
  c.name = StrCat(prefix, "-1024-1024-", conc, "-0.8");
  c.status = "ok";
  c.result = {{"completed", 10},
              {"request_throughput", throughput / 100},
              {"output_throughput", throughput},
              {"median_ttft_ms", ttft},
              {"median_tpot_ms", tpot},
              {"median_itl_ms", itl}};
  return c;
}

size_t Count(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<size_t>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(ReportTest, RegressionThresholds) {
  RunData base, run;
  base.cells = {MakeCell("m", 4, 1000, 100, 10, 10), MakeCell("m", 8, 1000, 100, 10, 10)};
  // conc 4: throughput exactly 5% down and latencies exactly 10% up: not regressions.
  // conc 8: just beyond both thresholds.
  run.cells = {MakeCell("m", 4, 950, 110, 11, 11), MakeCell("m", 8, 949, 110.1, 11.01, 9)};
  const std::vector<Regression> r = FindRegressions(run, base);
  std::vector<std::string> found;
  for (const Regression& x : r) found.push_back(x.cell + ":" + x.metric);
  EXPECT_THAT(found, ElementsAre("m-1024-1024-8-0.8:throughput", "m-1024-1024-8-0.8:ttft", "m-1024-1024-8-0.8:tpot"));
  EXPECT_NEAR(r[0].change, -0.051, 1e-9);
  EXPECT_DOUBLE_EQ(r[0].baseline, 1000);
  EXPECT_DOUBLE_EQ(r[0].current, 949);
}

TEST(ReportTest, FailedOrMissingCellsAreNotCompared) {
  RunData base, run;
  base.cells = {MakeCell("m", 4, 1000, 100)};
  run.cells = {MakeCell("m", 4, 10, 1000), MakeCell("m", 8, 10, 1000)};
  run.cells[0].status = "failed";
  EXPECT_TRUE(FindRegressions(run, base).empty());
  const std::string md = RenderMarkdown(run, &base);
  EXPECT_THAT(md, HasSubstr("| 1024 | 1024 | 0.8 | 8 | ok | 0.10 | 10.0 | 1000.00 | 5.00 | 5.00 | no baseline |"));
  EXPECT_THAT(md, HasSubstr("| 1024 | 1024 | 0.8 | 4 | failed | - | - | - | - | - | - |"));
}

TEST(ReportTest, MarkdownGroupsByModelAndSortsByWorkload) {
  RunData run;
  run.dir = "runs/today";
  run.cells = {MakeCell("b", 8, 800, 80), MakeCell("a", 4, 400, 40), MakeCell("b", 4, 400, 40)};
  run.cells.push_back(MakeCell("a", 2, 0, 0));
  run.cells.back().status = "failed";
  run.cells.back().error = "bench exited with code 1";
  run.cells.back().log_tail = "line 1\nline 2\n";
  const std::string md = RenderMarkdown(run, nullptr);
  EXPECT_THAT(md, HasSubstr("- Run: `runs/today`"));
  EXPECT_THAT(md, HasSubstr("- Cells: 4 (3 ok, 1 not ok)"));
  EXPECT_LT(md.find("## b display (`b`)"), md.find("## a display (`a`)"));  // order of first appearance
  EXPECT_LT(md.find("| 4 | ok | 4.00 | 400.0"), md.find("| 8 | ok | 8.00 | 800.0"));
  EXPECT_THAT(md, HasSubstr("### a-1024-1024-2-0.8 (failed)\n\nbench exited with code 1\n\n```\nline 1\nline 2\n```"));
  EXPECT_THAT(md, Not(HasSubstr("vs baseline")));

  run.cells.back().log_tail = "```\nfenced\n";
  EXPECT_THAT(RenderMarkdown(run, nullptr), HasSubstr("````\n```\nfenced\n````\n"));
}

TEST(DashboardTest, ChartsPerModelWorkloadAndMetric) {
  RunData run, base;
  run.cells = {MakeCell("a", 4, 400, 40), MakeCell("a", 8, 700, 90), MakeCell("a", 16, 900, 200)};
  CellOutcome other = MakeCell("a", 4, 300, 30);
  other.isl = 8192;
  other.name = "a-8192-1024-4-0.8";
  run.cells.push_back(other);
  run.cells.push_back(MakeCell("<b>", 4, 1, 1));  // escaped in the page
  base.cells = {MakeCell("a", 4, 400, 40), MakeCell("a", 8, 800, 60)};
  const std::string html = RenderDashboard(run, &base);
  EXPECT_EQ(Count(html, "<svg class=\"chart\""), 12u);  // (a: 2 workloads + <b>: 1) x 4 metrics
  for (const char* metric : {"throughput", "ttft", "tpot", "itl"}) {
    EXPECT_THAT(html, HasSubstr(std::string("id=\"chart-a-1024x1024-r0_8-") + metric + "\""));
    EXPECT_THAT(html, HasSubstr(std::string("id=\"chart-a-8192x1024-r0_8-") + metric + "\""));
    EXPECT_THAT(html, HasSubstr(std::string("id=\"chart-_b_-1024x1024-r0_8-") + metric + "\""));
  }
  EXPECT_THAT(html, Not(HasSubstr("<b> display")));
  EXPECT_THAT(html, HasSubstr("&lt;b&gt; display"));
  // conc 8: throughput -12.5% and TTFT +50%: one regression point in each of those charts.
  EXPECT_EQ(Count(html, "point current regression"), 2u);
  EXPECT_EQ(Count(html, "class=\"series baseline\""), 4u);  // only the 1024x1024 workload has a baseline
  EXPECT_EQ(Count(html, "class=\"point baseline\""), 8u);
  EXPECT_THAT(html, HasSubstr("id=\"regression-count\">2 regressions"));
  EXPECT_THAT(html, HasSubstr("data-points=\"3\""));
  EXPECT_THAT(html, Not(HasSubstr("src=")));  // nothing external
  EXPECT_EQ(ChartId("x.y", run.cells[0], "ttft"), "chart-x_y-1024x1024-r0_8-ttft");
  EXPECT_EQ(HtmlEscape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(DashboardTest, ChartWithoutDataSaysSo) {
  RunData run;
  run.cells = {MakeCell("a", 4, 400, 40)};
  run.cells[0].status = "failed";
  const std::string html = RenderDashboard(run, nullptr);
  EXPECT_EQ(Count(html, "data-points=\"0\""), 4u);
  EXPECT_EQ(Count(html, ">no data<"), 4u);
  EXPECT_THAT(html, HasSubstr("class=\"failed-cell\""));
}

TEST(ReportTest, BenchResultsInJsonLinesWithNonFiniteNumbers) {
  EXPECT_EQ(NullNonFinite(R"({"a": Infinity, "b": -Infinity, "c": NaN, "s": "NaN Infinity \" NaN"})"),
            R"({"a": null, "b": null, "c": null, "s": "NaN Infinity \" NaN"})");
  const std::string dir = MakeTempDir("results");
  std::ofstream(dir + "/r.json") << "{\"completed\": 1, \"request_rate\": Infinity}\n"
                                 << "{\"completed\": 2, \"request_rate\": Infinity}\n\n";
  const Json r = ReadBenchResult(dir + "/r.json");
  EXPECT_EQ(r["completed"], 2);  // the last line is the latest result
  EXPECT_TRUE(r["request_rate"].is_null());
  std::ofstream(dir + "/bad.json") << "{\"completed\": \n";
  EXPECT_THROW(ReadBenchResult(dir + "/bad.json"), Error);
  EXPECT_THROW(ReadBenchResult(dir + "/missing.json"), Error);
}

TEST(ReportTest, LoadRunWithoutManifestReadsResultFields) {
  const std::string dir = MakeTempDir("no-manifest");
  fs::create_directories(dir + "/results");
  std::ofstream(dir + "/results/my-model-1024-8-16-0.8.json")
      << R"({"random_input_len": 1024, "random_output_len": 8, "max_concurrency": 16, "random_range_ratio": 0.8,
             "completed": 160, "output_throughput": 123.5, "request_rate": Infinity})";
  std::ofstream(dir + "/results/other-1-2-4-1.json")
      << R"({"random_input_len": 1, "random_output_len": 2, "max_concurrency": 4, "completed": 0})";
  const RunData run = LoadRun(dir);
  ASSERT_EQ(run.cells.size(), 2u);
  const CellOutcome* c = run.Find("my-model-1024-8-16-0.8");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->prefix, "my-model");
  EXPECT_EQ(c->isl, 1024);
  EXPECT_EQ(c->osl, 8);
  EXPECT_EQ(c->concurrency, 16);
  EXPECT_DOUBLE_EQ(c->ratio, 0.8);
  EXPECT_EQ(c->Metric("output_throughput"), 123.5);
  EXPECT_EQ(run.Find("other-1-2-4-1")->status, "failed");
  EXPECT_THROW(LoadRun(dir + "/nope"), Error);
  EXPECT_THROW(LoadRun(MakeTempDir("empty")), Error);
}

TEST(ReportTest, ManifestCellWithUnreadableResultBecomesFailed) {
  const std::string dir = MakeTempDir("manifest");
  std::ofstream(dir + "/manifest.json") << R"({"created": "t", "cells": [
    {"name": "m-1-1-1-1", "prefix": "m", "isl": 1, "osl": 1, "concurrency": 1, "ratio": 1, "status": "ok",
     "result_file": "results/m-1-1-1-1.json"}]})";
  const RunData run = LoadRun(dir);
  ASSERT_EQ(run.cells.size(), 1u);
  EXPECT_EQ(run.cells[0].status, "failed");
  EXPECT_THAT(run.cells[0].error, HasSubstr("result unreadable"));
  std::ofstream(dir + "/manifest.json") << R"({"cells": [{"name": "m"}]})";
  EXPECT_THROW(LoadRun(dir), Error);  // names the manifest and the missing field
}

}  // namespace
}  // namespace fission::catalog
