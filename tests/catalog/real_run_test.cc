// The catalog run end to end with the real tools: `fission catalog run` starts `fission serve` on
// the bundled demo model at TP 1 and TP 2, runs `fission bench` for each cell, stops the server,
// and `fission catalog report` turns the results into a table and a dashboard.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/json.h"
#include "catalog/catalog_testlib.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;

constexpr const char* kCatalog = R"({
  "templates": {"extra_args": {"tp1": "--tp-size 1", "tp2": "--tp-size 2"}},
  "models": [
    {"prefix": "demo-tp1", "display": "Demo TP1", "path": "demo-deepseek-v3", "extra_args": "tp1"},
    {"prefix": "demo-tp2", "display": "Demo TP2", "path": "demo-deepseek-v3", "extra_args": ["tp2", "--disable-radix-cache"]}
  ]
})";

TEST(CatalogRealRun, ServesBenchesAndReportsTwoLayouts) {
  const std::string dir = MakeTempDir("real-run");
  const std::string catalog = dir + "/catalog.json";
  std::ofstream(catalog) << kCatalog;
  const std::string models = std::string(FISSION_SOURCE_DIR) + "/models";
  const CommandResult run = RunFission({"catalog", "run", catalog, "--out", dir + "/run", "--models-root", models,
                                        "--param-lists", "32,8,2,1", "--health-timeout", "120",
                                        "--stop-timeout", "30", "--cell-timeout", "600"},
                                       {});
  ASSERT_EQ(run.code, 0) << run.output;
  const Json manifest = ReadJsonFile(dir + "/run/manifest.json");
  ASSERT_EQ(manifest["cells"].size(), 2u) << manifest.dump(2);
  for (const Json& cell : manifest["cells"]) {
    EXPECT_EQ(cell["status"], "ok") << cell.dump(2);
    const std::string result_path = dir + "/run/results/" + cell["name"].get<std::string>() + ".json";
    ASSERT_TRUE(fs::exists(result_path)) << result_path;
    const Json result = ReadJsonFile(result_path);
    EXPECT_EQ(result["completed"], 20) << "10 x concurrency prompts";
    EXPECT_GT(result["output_throughput"].get<double>(), 0.0);
    EXPECT_GT(result["mean_ttft_ms"].get<double>(), 0.0);
  }
  const CommandResult report = RunFission({"catalog", "report", dir + "/run", "--out", dir + "/report"}, {});
  ASSERT_EQ(report.code, 0) << report.output;
  std::ifstream md(dir + "/report/report.md");
  const std::string table((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(table.find("Cells: 2 (2 ok, 0 not ok)"), std::string::npos) << table;
  EXPECT_NE(table.find("## Demo TP1 (`demo-tp1`)"), std::string::npos) << table;
  EXPECT_NE(table.find("## Demo TP2 (`demo-tp2`)"), std::string::npos) << table;
  EXPECT_NE(table.find("| 32 | 8 | 1 | 2 | ok |"), std::string::npos) << table;
  std::ifstream html(dir + "/report/dashboard.html");
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace fission::catalog
