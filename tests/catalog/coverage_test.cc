// What a catalog run will cover, said before it starts: the catalog's own workload grid, warnings
// for presets and entries that select nothing, and the cells whose server command `fission serve`
// would refuse (the check is handed in; the end-to-end case runs the real one through the binary).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "catalog/catalog_testlib.h"
#include "catalog/listing.h"
#include "catalog/runner.h"
#include "catalog/selection_warnings.h"
#include "catalog/serve_check.h"

namespace fission::catalog {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr const char* kPcp = R"({"models": [
  {"prefix": "ds-pcp", "path": "DeepSeek-V3", "extra_args": "--attn-cp-size 2 --tp-size 8",
   "supported_input_output_pairs": ["61440x600"]},
  {"prefix": "deepseek-r1", "path": "DeepSeek-R1", "extra_args": "--dp-size 8",
   "supported_concurrency_values": [3]},
  {"prefix": "deepseek-v3", "path": "DeepSeek-V3", "extra_args": "--tp-size 8"}
]})";

TEST(CatalogGridTest, WorkloadsInTheCatalogFile) {
  const Catalog c = ParseTestCatalog(R"({"models": [{"prefix": "a", "path": "A"},
    {"prefix": "m", "path": "M", "workload_label": "SGLang-Mesh", "tp_size": 8}],
    "workloads": {"SGLang-OOB": [{"isl": 128, "osl": 16, "concurrency": [1, 2], "ratio": 0.5}, "64,8,4,1"]}})");
  EXPECT_TRUE(c.warnings.empty());
  const Grids grids = GridsFor(c, nullptr);
  EXPECT_THAT(grids.For(Suite::kOob),
              ElementsAre(Workload{128, 16, 1, 0.5}, Workload{128, 16, 2, 0.5}, Workload{64, 8, 4, 1.0}));
  EXPECT_EQ(grids.For(Suite::kMesh), DefaultGrid(Suite::kMesh));  // no Mesh grid in the file
  EXPECT_EQ(grids.Source(Suite::kOob), "the catalog's workloads");
  EXPECT_EQ(ExpandModels({&c.models[0]}, grids).size(), 3u);
  // --param-lists wins over the file.
  const std::vector<Workload> flag = ParseParamLists("32,4,1,1");
  EXPECT_EQ(ExpandModels({&c.models[0], &c.models[1]}, GridsFor(c, &flag)).size(), 2u);
  // One grid for both suites.
  const Catalog both = ParseTestCatalog(R"({"models": [], "workloads": "16,4,1,1;16,4,2,1"})");
  EXPECT_EQ(both.grids.at(Suite::kMesh).size(), 2u);
  EXPECT_EQ(both.grids.at(Suite::kOob).size(), 2u);
}

TEST(CatalogGridTest, BadWorkloadsNameTheCatalogAndItem) {
  EXPECT_THAT(TestCatalogError(R"({"models": [], "workloads": [{"isl": 0, "osl": 1, "concurrency": 1}]})"),
              HasSubstr("test.json: 'workloads' item 0: 'isl' must be a positive integer"));
  EXPECT_THAT(TestCatalogError(R"({"models": [], "workloads": [{"isl": 8, "osl": 1, "concurrency": []}]})"),
              HasSubstr("empty list"));
  EXPECT_THAT(TestCatalogError(R"({"models": [], "workloads": [{"isl": 8, "osl": 1, "concurrency": 2, "conc": 1}]})"),
              HasSubstr("unknown key 'conc'"));
  EXPECT_THAT(TestCatalogError(R"({"models": [], "workloads": "8,1,2"})"), HasSubstr("'workloads'"));
  EXPECT_THAT(TestCatalogError(R"({"models": [], "workloads": {"SGLang-Big": "8,1,2,1"}})"),
              HasSubstr("unknown workload label 'SGLang-Big'"));
  EXPECT_THAT(TestCatalogError(R"({"models": [], "workloads": [{"isl": 8, "osl": 1, "concurrency": 2, "ratio": 2}]})"),
              HasSubstr("'ratio' must be a number in (0, 1]"));
}

TEST(SelectionWarningsTest, EntriesAndPresetsThatSelectNothing) {
  const Catalog c = ParseTestCatalog(kPcp);
  Selection s;
  s.presets = {"all-deepseek", "all-qwen", "ds-fp8-x"};
  const std::vector<const ModelEntry*> models = Select(c, s);
  const Grids grids = GridsFor(c, nullptr);
  const std::vector<Cell> cells = ExpandModels(models, grids);
  const std::vector<std::string> w = SelectionWarnings(c, s, models, cells, grids);
  ASSERT_EQ(w.size(), 3u) << ::testing::PrintToString(w);
  EXPECT_EQ(w[0], "test.json: preset 'all-qwen' selects no entry");
  EXPECT_EQ(w[1], "test.json: preset 'ds-fp8-x' selects no entry");
  EXPECT_EQ(w[2], "test.json: entry 1 ('deepseek-r1') gets no cell from the oob default grid: its concurrency "
                  "filters keep none of the grid's concurrencies for 1024x1024, 8192x1024");
  // ds-pcp is not a deepseek- prefix; selected by prefix it gets no cell either.
  s.presets = {"ds-pcp"};
  const auto pcp = Select(c, s);
  const std::vector<std::string> w2 = SelectionWarnings(c, s, pcp, ExpandModels(pcp, grids), grids);
  ASSERT_EQ(w2.size(), 2u);
  EXPECT_EQ(w2[0], "test.json: preset 'ds-pcp' selects 1 entries but no cell (their filters keep none of the grid)");
  EXPECT_EQ(w2[1], "test.json: entry 0 ('ds-pcp') gets no cell from the oob default grid: its "
                   "supported_input_output_pairs (61440x600) match none of the grid's pairs (1024x1024, 8192x1024)");
  // The same preset in another suite.
  s.presets = {"all-oob"};
  s.suite = Suite::kMesh;
  EXPECT_THAT(SelectionWarnings(c, s, Select(c, s), {}, grids),
              ElementsAre("test.json: preset 'all-oob' selects no entry in suite mesh"));
}

TEST(ServeCheckTest, ShellWordsAsShSplitsThem) {
  EXPECT_THAT(ShellWords(R"(a  'b c' "d \"e\" \$f" g\ h 'i'"j")", "t"), ElementsAre("a", "b c", "d \"e\" $f", "g h", "ij"));
  EXPECT_THAT(ShellWords("", "t"), IsEmpty());
  EXPECT_THROW(ShellWords("a 'b", "t"), Error);
  EXPECT_THROW(ShellWords("a \"b", "t"), Error);
}

TEST(ServeCheckTest, EachCellsServeArgumentsGoThroughTheCheck) {
  const Catalog c = ParseTestCatalog(kPcp);
  // deepseek-r1 keeps no workload of the default grid (concurrency 3): only deepseek-v3's cells.
  std::vector<Cell> cells = ExpandModels({&c.models[1], &c.models[2]}, GridsFor(c, nullptr));
  std::vector<std::vector<std::string>> seen;
  const ServeFlagCheck check = [&](const std::vector<std::string>& args) {
    seen.push_back(args);
    for (const std::string& a : args) {
      if (a == "--tp-size") return std::string("no tp today");
    }
    return std::string();
  };
  CheckServeCommands(cells, kDefaultServerCommand, "", R"({"n": 1})", check);
  ASSERT_EQ(cells.size(), 10u);
  ASSERT_EQ(seen.size(), 1u);  // one check per distinct server command
  EXPECT_THAT(seen[0], ElementsAre("--model-path", "DeepSeek-V3", "--tp-size", "8", "--json-model-override-args",
                                   R"({"n": 1})", "--host", "127.0.0.1", "--port", "1"));
  for (const Cell& cell : cells) {
    EXPECT_TRUE(cell.serve_checked);
    EXPECT_EQ(cell.serve_refusal, "no tp today");
  }
  EXPECT_THAT(RefusalSummary(cells), HasSubstr("10 of 10 cells would be refused by fission serve:\n"
                                               "  deepseek-v3-1024-1024-4-0.8 and 9 more: no tp today\n"));
  // A server command that is not `fission serve` is not checked; an environment prefix is skipped.
  std::vector<Cell> other = ExpandModels({&c.models[2]}, GridsFor(c, nullptr));
  CheckServeCommands(other, "python3 -m sglang.launch_server {server_args}", "", "", check);
  EXPECT_FALSE(other[0].serve_checked);
  EXPECT_TRUE(RefusalSummary(other).empty());
  CheckServeCommands(other, "FOO=1 {fission} serve {server_args}", "", "", check);
  EXPECT_TRUE(other[0].serve_checked);
  EXPECT_THAT(seen.back(), ElementsAre("--tp-size", "8"));
}

TEST(ServeCheckTest, ListingMarksRefusedCells) {
  const Catalog c = ParseTestCatalog(kPcp);
  const ServeFlagCheck refuse_dp = [](const std::vector<std::string>& args) {
    for (const std::string& a : args) {
      if (a == "--dp-size") return std::string("--dp-size 8: data parallelism has not landed yet (use 1)");
    }
    return std::string();
  };
  const std::vector<Workload> grid = ParseParamLists("1024,1024,3,1;1024,1024,4,1");
  const Listing l = BuildListing(c, Selection{}, &grid, refuse_dp);
  const std::string table = ListingTable(c, l, true);
  EXPECT_THAT(table, HasSubstr("REFUSED"));
  EXPECT_THAT(table, HasSubstr("1 of 3 cells would be refused by fission serve:\n  deepseek-r1-1024-1024-3-1: "
                               "--dp-size 8: data parallelism has not landed yet (use 1)\n"));
  EXPECT_THAT(table, HasSubstr("warning: test.json: entry 0 ('ds-pcp') gets no cell"));
  const Json j = ListingJson(c, l, true);
  EXPECT_EQ(j["counts"]["refused_cells"], 1);
  EXPECT_EQ(j["cells"][0]["serve_refusal"], "--dp-size 8: data parallelism has not landed yet (use 1)");
  EXPECT_TRUE(j["cells"][1]["serve_refusal"].is_null());
  EXPECT_EQ(ListingJson(c, l, false)["models"][1]["refused_cells"], 1);
}

TEST(CatalogCommandTest, ExpandChecksWithTheRealServerFlagsAndRunHelpWorks) {
  const std::string fixture = FISSION_SOURCE_DIR "/tests/fixtures/catalog/catalog.json";
  const CommandResult expand = RunFission({"catalog", "expand", fixture, "--format", "json"}, {});
  ASSERT_EQ(expand.code, 0) << expand.output;
  const Json j = Json::parse(expand.output.substr(expand.output.find('{')));
  std::map<std::string, std::string> refusal;
  for (const Json& cell : j["cells"]) {
    if (!cell["serve_refusal"].is_null()) refusal[cell["prefix"]] = cell["serve_refusal"];
  }
  // The fixture's FP4 entry asks for modelopt_fp4 and the DP-attention Mesh entry for DP
  // attention: fission serve refuses both, and nothing else (its MTP entry's speculative decoding
  // has landed).
  EXPECT_EQ(refusal.count("deepseek-r1-fp8-mtp"), 0u);
  EXPECT_THAT(refusal["deepseek-v3-fp4"], HasSubstr("--quantization modelopt_fp4"));
  EXPECT_EQ(refusal.count("deepseek-r1-fp8"), 0u);
  const CommandResult help = RunFission({"catalog", "run", "--help"}, {});
  EXPECT_EQ(help.code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("fission catalog run"));
  const CommandResult dry = RunFission({"catalog", "run", fixture, "--dry-run", "--preset", "all-deepseek-mtp"}, {});
  EXPECT_EQ(dry.code, 0) << dry.output;
  EXPECT_THAT(dry.output, Not(HasSubstr("refused: fission serve would refuse this command")));
}

}  // namespace
}  // namespace fission::catalog
