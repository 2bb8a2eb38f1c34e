// Expansion rules: grids, dedup, each filter, per-pair additions, Mesh arguments and prompt counts,
// cell names.
#include "catalog/expansion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "catalog/catalog_testlib.h"

namespace fission::catalog {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<Cell>& cells) {
  std::vector<std::string> out;
  for (const Cell& c : cells) out.push_back(c.name);
  return out;
}

std::vector<std::int64_t> Concs(const std::vector<Workload>& ws, std::int64_t isl, std::int64_t osl) {
  std::vector<std::int64_t> out;
  for (const Workload& w : ws) {
    if (w.isl == isl && w.osl == osl) out.push_back(w.concurrency);
  }
  return out;
}

TEST(ExpansionTest, OobDefaultGrid) {
  const std::vector<Workload> g = DefaultGrid(Suite::kOob);
  ASSERT_EQ(g.size(), 10u);
  EXPECT_THAT(Concs(g, 1024, 1024), ElementsAre(4, 8, 16, 32, 64));
  EXPECT_THAT(Concs(g, 8192, 1024), ElementsAre(4, 8, 16, 32, 64));
  for (const Workload& w : g) EXPECT_DOUBLE_EQ(w.ratio, 0.8);
}

TEST(ExpansionTest, MeshDefaultGrid) {
  const std::vector<Workload> g = DefaultGrid(Suite::kMesh);
  ASSERT_EQ(g.size(), 22u);
  EXPECT_THAT(Concs(g, 8192, 1), ElementsAre(2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048));
  EXPECT_THAT(Concs(g, 1, 1024), ElementsAre(2, 4, 8, 16, 32, 64, 128, 256, 1024, 2048, 4096));
  for (const Workload& w : g) EXPECT_DOUBLE_EQ(w.ratio, 1.0);
}

TEST(ExpansionTest, ParamLists) {
  EXPECT_THAT(ParseParamLists(" 128,16,4,0.5 ; ;64, 8, 2, 1;"),
              ElementsAre(Workload{128, 16, 4, 0.5}, Workload{64, 8, 2, 1.0}));
  for (const char* bad : {"", ";", "1,2,3", "1,2,3,4,5", "0,2,3,1", "1,2,0,1", "1,2,3,0", "1,2,3,1.5", "a,2,3,1",
                          "1,2,3,x", "1.5,2,3,1"}) {
    EXPECT_THROW(ParseParamLists(bad), Error) << bad;
  }
  try {
    ParseParamLists("1,2,-3,1");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("item \"1,2,-3,1\": concurrency must be a positive integer"));
  }
}

TEST(ExpansionTest, RatioFormatAndCellName) {
  EXPECT_EQ(FormatRatio(0.8), "0.8");
  EXPECT_EQ(FormatRatio(1.0), "1");
  EXPECT_EQ(FormatRatio(0.25), "0.25");
  EXPECT_EQ(CellName("deepseek-r1", {8192, 1024, 64, 0.8}), "deepseek-r1-8192-1024-64-0.8");
  EXPECT_EQ(CellName("ds-mesh", {1, 1024, 4096, 1.0}), "ds-mesh-1-1024-4096-1");
}

TEST(ExpansionTest, CrossProductDropsDuplicatesPerModelKeepingFirst) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p"}, {"prefix": "b", "path": "q"}])");
  const std::vector<Workload> grid = ParseParamLists("64,8,2,1;64,8,4,1;64,8,2,1;64,8,2,0.5;64,8,4,1");
  const std::vector<Cell> cells = ExpandModels({&c.models[0], &c.models[1]}, &grid);
  EXPECT_THAT(Names(cells), ElementsAre("a-64-8-2-1", "a-64-8-4-1", "a-64-8-2-0.5", "b-64-8-2-1", "b-64-8-4-1",
                                        "b-64-8-2-0.5"));
}

TEST(ExpansionTest, SuiteDefaultGridIsPerEntry) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "o", "path": "p"},
    {"prefix": "m", "path": "p", "workload_label": "SGLang-Mesh", "tp_size": 4}])");
  EXPECT_EQ(ExpandModel(c.models[0], nullptr).size(), 10u);
  EXPECT_EQ(ExpandModel(c.models[1], nullptr).size(), 22u);
}

TEST(ExpansionTest, SupportedPairsFilter) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p", "supported_input_output_pairs": ["8192x1024"]}])");
  EXPECT_THAT(Names(ExpandModel(c.models[0], nullptr)),
              ElementsAre("a-8192-1024-4-0.8", "a-8192-1024-8-0.8", "a-8192-1024-16-0.8", "a-8192-1024-32-0.8",
                          "a-8192-1024-64-0.8"));
}

TEST(ExpansionTest, ExcludedPairsFilter) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p", "excluded_input_output_pairs": ["8192x1024"]}])");
  EXPECT_THAT(Names(ExpandModel(c.models[0], nullptr)),
              ElementsAre("a-1024-1024-4-0.8", "a-1024-1024-8-0.8", "a-1024-1024-16-0.8", "a-1024-1024-32-0.8",
                          "a-1024-1024-64-0.8"));
}

TEST(ExpansionTest, ExcludedWinsOverSupported) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p", "supported_input_output_pairs": ["8192x1024"],
                               "excluded_input_output_pairs": ["8192x1024"]}])");
  EXPECT_TRUE(ExpandModel(c.models[0], nullptr).empty());
}

TEST(ExpansionTest, SupportedConcurrencyFilter) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p", "supported_concurrency_values": [8, 64, 1000]}])");
  EXPECT_THAT(Names(ExpandModel(c.models[0], nullptr)),
              ElementsAre("a-1024-1024-8-0.8", "a-1024-1024-64-0.8", "a-8192-1024-8-0.8", "a-8192-1024-64-0.8"));
}

TEST(ExpansionTest, ConcurrencyByPairOverridesTheGlobalListForItsPair) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p", "supported_concurrency_values": [4],
                               "supported_concurrency_values_by_pair": {"8192x1024": [16, 32]}}])");
  EXPECT_THAT(Names(ExpandModel(c.models[0], nullptr)),
              ElementsAre("a-1024-1024-4-0.8", "a-8192-1024-16-0.8", "a-8192-1024-32-0.8"));
  // Without a global list, pairs not listed keep every concurrency.
  const Catalog d = ParseTestCatalog(R"([{"prefix": "a", "path": "p",
                               "supported_concurrency_values_by_pair": {"1024x1024": [64]}}])");
  EXPECT_EQ(Names(ExpandModel(d.models[0], nullptr)).front(), "a-1024-1024-64-0.8");
  EXPECT_EQ(ExpandModel(d.models[0], nullptr).size(), 6u);
}

TEST(ExpansionTest, PerPairAdditions) {
  const Catalog c = ParseTestCatalog(R"({"templates": {"extra_args": {"base": "--a 1"}, "env_vars": {"e": "X=1\nY=2"}},
    "models": [{"prefix": "a", "path": "p", "extra_args": "base", "env_vars": "e",
      "case_extra_args_by_pair": {"8192x1024": "--long 1"},
      "case_env_vars_by_pair": {"8192x1024": "Y=3\nZ=4"}}]})");
  const std::vector<Cell> cells = ExpandModel(c.models[0], nullptr);
  ASSERT_EQ(cells.size(), 10u);
  EXPECT_EQ(cells[0].server_args, "--a 1");
  EXPECT_THAT(cells[0].env, ElementsAre(EnvVar{"X", "1"}, EnvVar{"Y", "2"}));
  EXPECT_EQ(cells[5].name, "a-8192-1024-4-0.8");
  EXPECT_EQ(cells[5].server_args, "--a 1 --long 1");
  EXPECT_THAT(cells[5].env, ElementsAre(EnvVar{"X", "1"}, EnvVar{"Y", "3"}, EnvVar{"Z", "4"}));
}

TEST(ExpansionTest, OobPromptCounts) {
  const Catalog c = ParseTestCatalog(R"([{"prefix": "a", "path": "p", "dp_size": 8, "ep_size": 8}])");
  const std::vector<Cell> cells = ExpandModel(c.models[0], nullptr);
  // dp/ep only matter for Mesh entries.
  EXPECT_EQ(cells[0].num_prompts, 40);
  EXPECT_EQ(cells[0].num_warmups, 8);
  EXPECT_EQ(cells[4].num_prompts, 640);
  EXPECT_EQ(cells[4].num_warmups, 128);
  EXPECT_EQ(cells[0].server_args, "");  // no --tensor-parallel-size for OOB entries
}

TEST(ExpansionTest, MeshArgumentsAndPromptCounts) {
  const Catalog c = ParseTestCatalog(R"([
    {"prefix": "tp", "path": "p", "workload_label": "SGLang-Mesh", "tp_size": 8, "dp_size": 1, "ep_size": 1,
     "extra_args": "--x 1", "case_extra_args_by_pair": {"8192x1": "--y 2"}},
    {"prefix": "dpep", "path": "p", "workload_label": "SGLang-Mesh", "tp_size": 8, "dp_size": 8, "ep_size": 8},
    {"prefix": "dponly", "path": "p", "workload_label": "SGLang-Mesh", "tp_size": 8, "dp_size": 8, "ep_size": 1},
    {"prefix": "eponly", "path": "p", "workload_label": "SGLang-Mesh", "tp_size": 8, "ep_size": 8}])");
  const std::vector<Cell> tp = ExpandModel(c.models[0], nullptr);
  ASSERT_EQ(tp.size(), 22u);
  EXPECT_EQ(tp[0].name, "tp-8192-1-2-1");
  EXPECT_EQ(tp[0].server_args, "--tensor-parallel-size 8 --x 1 --y 2");
  EXPECT_EQ(tp[11].name, "tp-1-1024-2-1");
  EXPECT_EQ(tp[11].server_args, "--tensor-parallel-size 8 --x 1");
  EXPECT_EQ(tp[0].num_prompts, 20);
  EXPECT_EQ(tp[0].num_warmups, 4);

  const std::vector<Cell> dpep = ExpandModel(c.models[1], nullptr);
  EXPECT_EQ(dpep[0].server_args, "--tensor-parallel-size 8");
  EXPECT_EQ(dpep[0].num_prompts, 6);   // 3 x 2
  EXPECT_EQ(dpep[0].num_warmups, 2);   // 1 x 2
  EXPECT_EQ(dpep.back().name, "dpep-1-1024-4096-1");
  EXPECT_EQ(dpep.back().num_prompts, 3 * 4096);
  EXPECT_EQ(dpep.back().num_warmups, 4096);

  for (int i : {2, 3}) {
    const std::vector<Cell> cells = ExpandModel(c.models[i], nullptr);
    EXPECT_EQ(cells[0].num_prompts, 20) << c.models[i].prefix;
    EXPECT_EQ(cells[0].num_warmups, 4) << c.models[i].prefix;
  }
}

}  // namespace
}  // namespace fission::catalog
