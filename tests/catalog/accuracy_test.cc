// The accuracy catalog: validation, score extraction, and `fission catalog accuracy` against the fake
// server and eval.
#include "catalog/accuracy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/mapped_file.h"
#include "catalog/catalog_testlib.h"

namespace fission::catalog {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kFixture = FISSION_SOURCE_DIR "/tests/fixtures/catalog/accuracy.json";

std::string ErrorOf(const std::string& text) {
  try {
    ParseAccuracyCatalog(Json::parse(text), "acc.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(AccuracyCatalogTest, ParsesBothSpellings) {
  const AccuracyCatalog c = LoadAccuracyCatalog(kFixture);
  ASSERT_EQ(c.entries.size(), 2u);
  const AccuracyEntry& a = c.entries[0];
  EXPECT_EQ(a.model_name, "DeepSeek-R1");
  EXPECT_EQ(a.model_path, "deepseek-ai/DeepSeek-R1");
  EXPECT_EQ(a.extra_args, "--tp-size 8 --trust-remote-code");
  EXPECT_THAT(a.env, ElementsAre(EnvVar{"SGLANG_USE_AITER", "1"}));
  EXPECT_EQ(a.runner, "mi355-8gpu");
  EXPECT_EQ(a.test_level, "nightly");
  EXPECT_DOUBLE_EQ(a.threshold, 0.93);
  EXPECT_EQ(a.threshold_field, "accuracy_threshold");
  const AccuracyEntry& b = c.entries[1];
  EXPECT_EQ(b.extra_args, "--tp-size 2 --trust-remote-code");
  EXPECT_THAT(b.env, ElementsAre(EnvVar{"A", "1"}, EnvVar{"B", "2"}));
  EXPECT_EQ(b.test_level, "1");
  EXPECT_DOUBLE_EQ(b.threshold, 0.85);
  EXPECT_EQ(b.threshold_field, "accuracy_test_threshold");
  EXPECT_EQ(b.unknown["notes"], "kept");
  ASSERT_EQ(c.warnings.size(), 1u);
  EXPECT_THAT(c.warnings[0], HasSubstr("entry 1 ('Qwen3-30B'): unknown key 'notes' kept"));
}

TEST(AccuracyCatalogTest, ThresholdBoundsAreInclusive) {
  EXPECT_EQ(ErrorOf(R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0},
                        {"model_name": "b", "model_path": "p", "accuracy_test_threshold": 1}])"),
            "");
}

TEST(AccuracyCatalogTest, Errors) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0.9, "accuracy_test_threshold": 0.9}])",
       "acc.json: entry 0 ('a'): give 'accuracy_threshold' or 'accuracy_test_threshold', not both"},
      {R"([{"model_name": "a", "model_path": "p"}])", "entry 0 ('a'): missing 'accuracy_threshold'"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 1.5}])",
       "entry 0 ('a'): field 'accuracy_threshold' must be a number in [0, 1], got 1.5"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_test_threshold": -0.1}])",
       "field 'accuracy_test_threshold' must be a number in [0, 1]"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": "0.9"}])",
       "field 'accuracy_threshold' must be a number in [0, 1], got \"0.9\""},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0.9, "extraArgs": "--x", "extra_args": "--y"}])",
       "entry 0 ('a'): give 'extraArgs' or 'extra_args', not both"},
      {R"([{"model_path": "p", "accuracy_threshold": 0.9}])", "acc.json: entry 0: missing field 'model_name'"},
      {R"([{"model_name": "a", "accuracy_threshold": 0.9}])", "entry 0 ('a'): missing field 'model_path'"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0.9},
           {"model_name": "a", "model_path": "q", "accuracy_threshold": 0.9}])",
       "entry 1 ('a'): duplicate model_name"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0.9, "env_vars": "NOPE"}])",
       "entry 0 ('a'): field 'env_vars': line 1 \"NOPE\" is not NAME=VALUE"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0.9, "extra_args": 3}])",
       "field 'extra_args' must be a string or a list of strings"},
      {R"([{"model_name": "a", "model_path": "p", "accuracy_threshold": 0.9, "test_level": 1.5}])",
       "field 'test_level' must be a string or an integer"},
      {R"({"model_name": "a"})", "acc.json: an accuracy catalog is a JSON array of entries"},
      {R"([7])", "acc.json: entry 0: expected a JSON object"},
  };
  for (const auto& [json, message] : cases) EXPECT_THAT(ErrorOf(json), HasSubstr(message)) << json;
}

TEST(AccuracyCatalogTest, FlexibleExtractScore) {
  EXPECT_DOUBLE_EQ(FlexibleExtractScore(Json::parse(R"({"results": {"other": {"exact_match,flexible-extract": 0.1},
      "gsm8k": {"exact_match,strict-match": 0.5, "exact_match,flexible-extract": 0.93}}})"), "r"),
                   0.93);
  EXPECT_DOUBLE_EQ(FlexibleExtractScore(Json::parse(R"({"results": {"gsm8k_cot": {"exact_match,flexible-extract": 0.7}}})"), "r"),
                   0.7);
  EXPECT_DOUBLE_EQ(FlexibleExtractScore(Json::parse(R"({"exact_match,flexible-extract": 0.6})"), "r"), 0.6);
  try {
    FlexibleExtractScore(Json::parse(R"({"results": {"gsm8k": {"exact_match,strict-match": 0.5}}})"), "out.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("out.json: no 'exact_match,flexible-extract' score"));
  }
}

TEST(AccuracyCatalogTest, EvalOutputFileOrDirectory) {
  const std::string dir = MakeTempDir("eval-out");
  std::ofstream(dir + "/file.json") << R"({"exact_match,flexible-extract": 0.5})";
  EXPECT_EQ(ReadEvalOutput(dir + "/file.json")["exact_match,flexible-extract"], 0.5);
  fs::create_directories(dir + "/out/model");
  std::ofstream(dir + "/out/model/results_1.json") << R"({"exact_match,flexible-extract": 0.6})";
  fs::last_write_time(dir + "/out/model/results_1.json", fs::file_time_type::clock::now() - std::chrono::hours(1));
  std::ofstream(dir + "/out/model/results_2.json") << R"({"exact_match,flexible-extract": 0.7})";
  EXPECT_EQ(ReadEvalOutput(dir + "/out")["exact_match,flexible-extract"], 0.7);  // the newest
  EXPECT_THROW(ReadEvalOutput(dir + "/missing"), Error);
  fs::create_directories(dir + "/empty");
  EXPECT_THROW(ReadEvalOutput(dir + "/empty"), Error);
}

TEST(AccuracyRunTest, GatesOnFlexibleExtract) {
  const std::string d = MakeTempDir("accuracy");
  fs::create_directories(d + "/models/pass-model");
  fs::create_directories(d + "/models/fail-model");
  std::ofstream(d + "/acc.json") << R"([
    {"model_name": "passes", "model_path": "pass-model", "extra_args": "--tp-size 1", "env_vars": "CATALOG_ACC=1",
     "test_level": "pr", "accuracy_threshold": 0.85},
    {"model_name": "fails", "model_path": "fail-model", "extraArgs": ["--tp-size", "2"], "test_level": "pr",
     "accuracy_test_threshold": 0.95},
    {"model_name": "skipped", "model_path": "fail-model", "test_level": "nightly", "accuracy_threshold": 0.1}])";
  const std::map<std::string, std::string> env = {
      {"FISSION_CATALOG_FAKE", "1"}, {"FISSION_CATALOG_FAKE_DIR", d}, {"FISSION_CATALOG_FAKE_SCORE", "0.9"}};
  const std::vector<std::string> common = {"--fission-bin", TestExecutable(), "--models-root", d + "/models",
                                           "--test-level", "pr", "--health-timeout", "30", "--stop-timeout", "5"};
  std::vector<std::string> args = {"catalog", "accuracy", d + "/acc.json", "--out", d + "/out"};
  args.insert(args.end(), common.begin(), common.end());
  const CommandResult r = RunFission(args, env);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("passes: pass (flexible-extract 0.9 vs threshold 0.85)"));
  EXPECT_THAT(r.output, HasSubstr("fails: fail (flexible-extract 0.9 vs threshold 0.95)"));
  EXPECT_THAT(r.output, HasSubstr("| passes | 0.85 | 0.900000 | pass |"));
  const Json summary = ReadJsonFile(d + "/out/accuracy.json");
  ASSERT_EQ(summary.size(), 2u);  // the nightly entry is not selected
  EXPECT_EQ(summary[0]["status"], "pass");
  EXPECT_EQ(summary[1]["status"], "fail");
  const std::vector<std::string> servers = ReadLines(d + "/servers.jsonl");
  ASSERT_EQ(servers.size(), 2u);
  const Json s0 = Json::parse(servers[0]);
  EXPECT_EQ(s0["env"]["CATALOG_ACC"], "1");
  EXPECT_EQ(s0["argv"][3], d + "/models/pass-model");
  EXPECT_EQ(s0["argv"][4], "--tp-size");
  EXPECT_EQ(s0["argv"][5], "1");
  for (const std::string& line : servers) {
    const Json s = Json::parse(line);
    EXPECT_TRUE(WaitUntilDead(s["pid"].get<int>(), std::chrono::milliseconds(5000)));
    EXPECT_TRUE(WaitUntilDead(s["worker_pid"].get<int>(), std::chrono::milliseconds(5000)));
  }

  // Every entry passing gives exit code 0.
  std::map<std::string, std::string> good = env;
  good["FISSION_CATALOG_FAKE_SCORE"] = "0.97";
  args[4] = d + "/out2";
  EXPECT_EQ(RunFission(args, good).code, 0);

  // Validation and dry run start nothing.
  const CommandResult v = RunFission({"catalog", "accuracy", kFixture, "--validate"}, {});
  EXPECT_EQ(v.code, 0) << v.output;
  EXPECT_THAT(v.output, HasSubstr("2 entries valid"));
  const CommandResult dry = RunFission({"catalog", "accuracy", d + "/acc.json", "--dry-run", "--model", "fails",
                                        "--fission-bin", "/opt/fission", "--port", "31001"},
                                       {});
  EXPECT_EQ(dry.code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("server: /opt/fission serve --model-path fail-model --tp-size 2 --host 127.0.0.1 "
                                    "--port 31001"));
  EXPECT_THAT(dry.output, HasSubstr("eval: /opt/fission eval --base-url http://127.0.0.1:31001 --model fail-model "
                                    "--tasks gsm8k --num-fewshot 5 --output-path"));
  EXPECT_THAT(dry.output, Not(HasSubstr("passes")));
  const CommandResult bad = RunFission({"catalog", "accuracy", d + "/acc.json", "--validate", "--model", "nope"}, {});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.output, HasSubstr("no entry named 'nope'"));
}

}  // namespace
}  // namespace fission::catalog
