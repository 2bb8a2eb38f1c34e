// Presets, suites, weekday schedules and the expand/list counts.
#include "catalog/selection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "catalog/listing.h"

namespace fission::catalog {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const Catalog& Fixture() {
  static const Catalog c = LoadCatalog(FISSION_SOURCE_DIR "/tests/fixtures/catalog/catalog.json");
  return c;
}

std::vector<std::string> Prefixes(const Selection& s) {
  std::vector<std::string> out;
  for (const ModelEntry* e : Select(Fixture(), s)) out.push_back(e->prefix);
  return out;
}

Selection Presets(std::vector<std::string> presets, std::optional<Suite> suite = std::nullopt) {
  Selection s;
  s.presets = std::move(presets);
  s.suite = suite;
  return s;
}

TEST(SelectionTest, NoSelectionIsEverything) { EXPECT_EQ(Prefixes({}).size(), 7u); }

TEST(SelectionTest, Suites) {
  Selection oob;
  oob.suite = Suite::kOob;
  EXPECT_THAT(Prefixes(oob),
              ElementsAre("deepseek-r1-fp8", "deepseek-r1-fp8-mtp", "deepseek-v3-fp4", "qwen3-235b", "glm-5-fp8"));
  Selection mesh;
  mesh.suite = Suite::kMesh;
  EXPECT_THAT(Prefixes(mesh), ElementsAre("ds-mesh-fp8-tp8", "ds-mesh-fp4-dp8ep8"));
}

TEST(SelectionTest, OobPresets) {
  EXPECT_THAT(Prefixes(Presets({"all-oob"})),
              ElementsAre("deepseek-r1-fp8", "deepseek-r1-fp8-mtp", "deepseek-v3-fp4", "qwen3-235b", "glm-5-fp8"));
  EXPECT_THAT(Prefixes(Presets({"all-deepseek"})),
              ElementsAre("deepseek-r1-fp8", "deepseek-r1-fp8-mtp", "deepseek-v3-fp4"));
  EXPECT_THAT(Prefixes(Presets({"all-deepseek-non-mtp"})), ElementsAre("deepseek-r1-fp8", "deepseek-v3-fp4"));
  EXPECT_THAT(Prefixes(Presets({"all-deepseek-mtp"})), ElementsAre("deepseek-r1-fp8-mtp"));
  EXPECT_THAT(Prefixes(Presets({"all-qwen"})), ElementsAre("qwen3-235b"));
}

TEST(SelectionTest, ExactPrefixAndUnion) {
  EXPECT_THAT(Prefixes(Presets({"glm-5-fp8"})), ElementsAre("glm-5-fp8"));
  EXPECT_THAT(Prefixes(Presets({"ds-mesh-fp8-tp8"})), ElementsAre("ds-mesh-fp8-tp8"));
  EXPECT_THAT(Prefixes(Presets({"all-qwen", "glm-5-fp8"})), ElementsAre("qwen3-235b", "glm-5-fp8"));
  // An explicit suite still applies to a prefix.
  EXPECT_THAT(Prefixes(Presets({"glm-5-fp8"}, Suite::kMesh)), IsEmpty());
}

TEST(SelectionTest, MeshPresetsAreTags) {
  EXPECT_THAT(Prefixes(Presets({"ds-all"})), ElementsAre("ds-mesh-fp8-tp8", "ds-mesh-fp4-dp8ep8"));
  EXPECT_THAT(Prefixes(Presets({"ds-fp8-tp8"})), ElementsAre("ds-mesh-fp8-tp8"));
  EXPECT_THAT(Prefixes(Presets({"ds-fp4-dp"})), ElementsAre("ds-mesh-fp4-dp8ep8"));
  EXPECT_THAT(Prefixes(Presets({"fp4-dp"})), ElementsAre("ds-mesh-fp4-dp8ep8"));  // the tag itself
  EXPECT_EQ(MeshTag("ds-all"), "all");
  EXPECT_EQ(MeshTag("ds-fp4-x"), "fp4-x");
  EXPECT_EQ(MeshTag("ds-fp8-x"), "fp8-x");
  EXPECT_EQ(MeshTag("other"), "other");
  // OOB presets never select Mesh entries, and Mesh tags never OOB entries.
  EXPECT_THAT(Prefixes(Presets({"all-oob"}, Suite::kMesh)), IsEmpty());
  EXPECT_THAT(Prefixes(Presets({"ds-all"}, Suite::kOob)), IsEmpty());
}

TEST(SelectionTest, UnknownPresetIsAnError) {
  try {
    Select(Fixture(), Presets({"all-llama"}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown preset 'all-llama'"));
    EXPECT_THAT(e.what(), HasSubstr("ds-fp4-dp"));
  }
  // A well-formed preset name that selects nothing is not an error (SelectionWarnings says so).
  EXPECT_THAT(Prefixes(Presets({"ds-fp8-nothing"})), IsEmpty());
  EXPECT_THROW(Select(Fixture(), Presets({"fp8-nothing"})), Error);  // neither a preset name nor a tag
}

TEST(SelectionTest, Weekdays) {
  EXPECT_EQ(ParseWeekday("mon"), Weekday::kMonday);
  EXPECT_EQ(ParseWeekday("Tuesday"), Weekday::kTuesday);
  EXPECT_EQ(ParseWeekday("WED"), Weekday::kWednesday);
  EXPECT_EQ(ParseWeekday("thu"), Weekday::kThursday);
  EXPECT_EQ(ParseWeekday("fri"), Weekday::kFriday);
  EXPECT_EQ(ParseWeekday("sat"), Weekday::kSaturday);
  EXPECT_EQ(ParseWeekday("sunday"), Weekday::kSunday);
  EXPECT_NO_THROW(ParseWeekday("today"));
  EXPECT_THROW(ParseWeekday("mo"), Error);
  EXPECT_THROW(ParseWeekday("someday"), Error);
  EXPECT_STREQ(WeekdayName(Weekday::kFriday), "fri");
}

TEST(SelectionTest, EachWeekdaySchedule) {
  auto day = [](const char* d) { return Prefixes(ScheduleFor(ParseWeekday(d))); };
  EXPECT_THAT(day("mon"), ElementsAre("deepseek-r1-fp8", "deepseek-v3-fp4"));
  EXPECT_THAT(day("wed"), ElementsAre("deepseek-r1-fp8", "deepseek-v3-fp4"));
  EXPECT_THAT(day("tue"), ElementsAre("deepseek-r1-fp8-mtp", "qwen3-235b"));
  EXPECT_THAT(day("thu"), ElementsAre("deepseek-r1-fp8-mtp", "qwen3-235b"));
  EXPECT_THAT(day("fri"), ElementsAre("ds-mesh-fp8-tp8", "ds-mesh-fp4-dp8ep8"));
  EXPECT_THAT(day("sat"),
              ElementsAre("deepseek-r1-fp8", "deepseek-r1-fp8-mtp", "deepseek-v3-fp4", "qwen3-235b", "glm-5-fp8"));
  EXPECT_THAT(day("sun"), IsEmpty());
}

TEST(SelectionTest, SplitList) {
  EXPECT_THAT(SplitList(" a, b,,c "), ElementsAre("a", "b", "c"));
  EXPECT_THAT(SplitList(""), IsEmpty());
}

TEST(ListingTest, CountsPerModelAndPreset) {
  const Listing l = BuildListing(Fixture(), Presets({"all-deepseek"}), nullptr);
  // r1-fp8: both pairs x 5; mtp: 1024x1024 at 4,8,16 + 8192x1024 at 4,8; v3: 1024x1024 x 5.
  EXPECT_THAT(l.per_model, ElementsAre(std::pair<std::string, size_t>{"deepseek-r1-fp8", 10},
                                       std::pair<std::string, size_t>{"deepseek-r1-fp8-mtp", 5},
                                       std::pair<std::string, size_t>{"deepseek-v3-fp4", 5}));
  EXPECT_EQ(l.cells.size(), 20u);
  std::map<std::string, size_t> presets(l.per_preset.begin(), l.per_preset.end());
  EXPECT_EQ(presets.at("all-oob"), 40u);
  EXPECT_EQ(presets.at("all-deepseek"), 20u);
  EXPECT_EQ(presets.at("all-deepseek-non-mtp"), 15u);
  EXPECT_EQ(presets.at("all-deepseek-mtp"), 5u);
  EXPECT_EQ(presets.at("all-qwen"), 10u);
  EXPECT_EQ(presets.at("ds-all"), 44u);
  EXPECT_EQ(presets.at("ds-fp8-tp8"), 22u);
  EXPECT_EQ(presets.at("ds-fp4-dp"), 22u);

  const Json j = ListingJson(Fixture(), l, true);
  EXPECT_EQ(j["counts"]["cells"], 20);
  EXPECT_EQ(j["counts"]["models"], 3);
  EXPECT_EQ(j["counts"]["per_model"]["deepseek-r1-fp8-mtp"], 5);
  EXPECT_EQ(j["counts"]["per_preset"]["ds-all"], 44);
  EXPECT_EQ(j["cells"].size(), 20u);
  EXPECT_EQ(j["cells"][5]["name"], "deepseek-r1-fp8-8192-1024-4-0.8");
  EXPECT_EQ(j["cells"][5]["env"]["SGLANG_LONG_PREFILL"], "1");
  EXPECT_EQ(j["warnings"].size(), 1u);
  const Json models = ListingJson(Fixture(), l, false);
  EXPECT_EQ(models["models"].size(), 3u);
  EXPECT_EQ(models["models"][1]["cells"], 5);
  EXPECT_EQ(models["models"][2]["unknown"]["owner"], "perf-team");

  const std::string table = ListingTable(Fixture(), l, true);
  EXPECT_THAT(table, HasSubstr("total: 3 models, 20 cells"));
  EXPECT_THAT(table, HasSubstr("deepseek-r1-fp8-mtp-8192-1024-8-0.8"));
  EXPECT_THAT(table, HasSubstr("warning: "));
}

TEST(ListingTest, MeshSuiteCountsWithParamLists) {
  Selection s;
  s.suite = Suite::kMesh;
  const std::vector<Workload> grid = ParseParamLists("8192,1,2,1;8192,1,4,1");
  const Listing l = BuildListing(Fixture(), s, &grid);
  EXPECT_EQ(l.cells.size(), 4u);
  std::map<std::string, size_t> presets(l.per_preset.begin(), l.per_preset.end());
  EXPECT_EQ(presets.at("all-oob"), 0u);  // within the Mesh suite
  EXPECT_EQ(presets.at("ds-all"), 4u);
  EXPECT_EQ(l.cells[2].num_prompts, 6);  // dp8 ep8: 3 x 2
}

}  // namespace
}  // namespace fission::catalog
