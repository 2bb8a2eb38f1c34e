// The catalog format: both forms, template resolution, literals, lists, filters' parsing, unknown keys
// and every error.
#include "catalog/catalog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "catalog/catalog_testlib.h"
#include "catalog/expansion.h"

namespace fission::catalog {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kFixtures = FISSION_SOURCE_DIR "/tests/fixtures/catalog/";

TEST(CatalogTest, TemplatesFormResolvesTemplateNamesAndLiterals) {
  const Catalog c = LoadCatalog(kFixtures + "catalog.json");
  EXPECT_FALSE(c.legacy);
  ASSERT_EQ(c.models.size(), 7u);
  const ModelEntry& r1 = *c.Find("deepseek-r1-fp8");
  // A list of template names, joined with spaces in order.
  EXPECT_EQ(r1.extra_args, "--trust-remote-code --mem-fraction-static 0.8 --tp-size 8");
  // A single template name for env_vars, split into lines.
  EXPECT_THAT(r1.env, ElementsAre(EnvVar{"SGLANG_USE_AITER", "1"}, EnvVar{"NCCL_MIN_NCHANNELS", "112"}));
  EXPECT_EQ(r1.display, "DeepSeek-R1 FP8");
  EXPECT_EQ(r1.dashboard_model, "DeepSeek-R1");
  EXPECT_EQ(r1.source_path, "deepseek-ai/DeepSeek-R1");
  EXPECT_EQ(r1.path, "DeepSeek-R1");
  EXPECT_EQ(r1.runner, "mi355-8gpu");
  EXPECT_EQ(r1.nightly_group, "deepseek");
  EXPECT_EQ(r1.suite, Suite::kOob);
  EXPECT_EQ(r1.workload_label, "SGLang-OOB");

  // A template whose value is a list, among other names; a list of env template names.
  const ModelEntry& mtp = *c.Find("deepseek-r1-fp8-mtp");
  EXPECT_EQ(mtp.extra_args,
            "--trust-remote-code --mem-fraction-static 0.8 --tp-size 8 --speculative-algorithm EAGLE "
            "--speculative-num-steps 3");
  EXPECT_THAT(mtp.env, ElementsAre(EnvVar{"SGLANG_USE_AITER", "1"}, EnvVar{"NCCL_MIN_NCHANNELS", "112"},
                                   EnvVar{"SGLANG_MTP_FUSED", "1"}));
  EXPECT_EQ(mtp.bench_args, "--disable-ignore-eos");

  // Literal strings that name no template.
  const ModelEntry& v3 = *c.Find("deepseek-v3-fp4");
  EXPECT_EQ(v3.extra_args, "--tp-size 4 --quantization modelopt_fp4");
  EXPECT_THAT(v3.env, ElementsAre(EnvVar{"FOO", "bar"}));
  // A single string that is a template name.
  EXPECT_EQ(c.Find("qwen3-235b")->extra_args, "--trust-remote-code --mem-fraction-static 0.8");
  // Absent extra_args / env_vars are empty; display defaults flow through.
  EXPECT_EQ(c.Find("glm-5-fp8")->extra_args, "");
  EXPECT_TRUE(c.Find("glm-5-fp8")->env.empty());
}

TEST(CatalogTest, MeshFields) {
  const Catalog c = LoadCatalog(kFixtures + "catalog.json");
  const ModelEntry& m = *c.Find("ds-mesh-fp4-dp8ep8");
  EXPECT_EQ(m.suite, Suite::kMesh);
  EXPECT_EQ(m.mesh_spec_mode, "mtp");
  EXPECT_THAT(m.mesh_presets, ElementsAre("all", "fp4-dp"));
  EXPECT_EQ(m.tp_size, 8);
  EXPECT_EQ(m.dp_size, 8);
  EXPECT_EQ(m.ep_size, 8);
  EXPECT_EQ(m.extra_args, "--trust-remote-code --mem-fraction-static 0.8 --enable-dp-attention --dp-size 8");
}

TEST(CatalogTest, FiltersAndPerPairAdditionsAreParsedAndNormalized) {
  const Catalog c = ParseTestCatalog(R"({"templates": {"extra_args": {"long": "--chunked-prefill-size 8192"},
                                            "env_vars": {"long-env": "LONG=1"}},
    "models": [{"prefix": "m", "path": "p",
      "supported_input_output_pairs": ["01024x1024", "8192x1"],
      "excluded_input_output_pairs": ["1x1024"],
      "supported_concurrency_values_by_pair": {"8192x1": [2, 4]},
      "supported_concurrency_values": [8],
      "case_extra_args_by_pair": {"8192x1": ["long", "--x 1"]},
      "case_env_vars_by_pair": {"8192x1": ["long-env", "B=2"]}}]})");
  const ModelEntry& m = c.models[0];
  ASSERT_TRUE(m.supported_pairs);
  EXPECT_THAT(*m.supported_pairs, ElementsAre("1024x1024", "8192x1"));
  EXPECT_THAT(m.excluded_pairs, ElementsAre("1x1024"));
  EXPECT_THAT(m.concurrency_by_pair.at("8192x1"), ElementsAre(2, 4));
  ASSERT_TRUE(m.supported_concurrency);
  EXPECT_THAT(*m.supported_concurrency, ElementsAre(8));
  EXPECT_EQ(m.case_extra_args_by_pair.at("8192x1"), "--chunked-prefill-size 8192 --x 1");
  EXPECT_THAT(m.case_env_by_pair.at("8192x1"), ElementsAre(EnvVar{"LONG", "1"}, EnvVar{"B", "2"}));
}

TEST(CatalogTest, LegacyArrayForm) {
  const Catalog c = LoadCatalog(kFixtures + "legacy.json");
  EXPECT_TRUE(c.legacy);
  ASSERT_EQ(c.models.size(), 2u);
  EXPECT_EQ(c.models[0].extra_args, "--tp-size 8 --trust-remote-code");
  EXPECT_THAT(c.models[0].env, ElementsAre(EnvVar{"SGLANG_USE_AITER", "1"}));
  // No templates: list elements are literals; path falls back to source_path.
  EXPECT_EQ(c.models[1].extra_args, "--tp-size 2 --trust-remote-code");
  EXPECT_THAT(c.models[1].env, ElementsAre(EnvVar{"A", "1"}, EnvVar{"B", "2"}));
  EXPECT_EQ(c.models[1].path, "Qwen/Qwen3-30B-A3B");
  EXPECT_EQ(c.models[1].display, "Qwen3 30B");
  EXPECT_EQ(c.models[0].dashboard_model, "DeepSeek-R1");  // defaults to display
}

TEST(CatalogTest, TemplateNameMatchIsExact) {
  // "base " (trailing space) and "Base" are not the template "base": they stay literal.
  const Catalog c = ParseTestCatalog(R"({"templates": {"extra_args": {"base": "--a 1"}},
    "models": [{"prefix": "m", "path": "p", "extra_args": ["base", "Base", "--b 2"]}]})");
  EXPECT_EQ(c.models[0].extra_args, "--a 1 Base --b 2");
}

TEST(CatalogTest, UnknownKeysAreKeptAndReported) {
  const Catalog c = ParseTestCatalog(R"({"templates": {"extra_args": {}, "other": {}}, "version": 3,
    "models": [{"prefix": "m", "path": "p", "owner": "perf", "notes": [1, 2]}]})");
  EXPECT_EQ(c.models[0].unknown["owner"], "perf");
  EXPECT_EQ(c.models[0].unknown["notes"], Json::parse("[1, 2]"));
  ASSERT_EQ(c.warnings.size(), 4u);
  std::string all;
  for (const std::string& w : c.warnings) all += w + "\n";
  EXPECT_THAT(all, HasSubstr("'templates.other'"));
  EXPECT_THAT(all, HasSubstr("'version'"));
  EXPECT_THAT(all, HasSubstr("entry 0 ('m'): unknown key 'owner'"));
  EXPECT_THAT(all, HasSubstr("unknown key 'notes'"));
}

TEST(CatalogTest, EnvTextSkipsCommentsAndExportAndLaterValuesWin) {
  EXPECT_THAT(ParseEnvText("# comment\n\nexport A=1\n B = x=y \nA=2\n", "w"),
              ElementsAre(EnvVar{"A", "2"}, EnvVar{"B", "x=y"}));
  EXPECT_THAT(MergeEnv({{"A", "1"}, {"B", "2"}}, {{"B", "3"}, {"C", "4"}}),
              ElementsAre(EnvVar{"A", "1"}, EnvVar{"B", "3"}, EnvVar{"C", "4"}));
}

TEST(CatalogTest, IoPairs) {
  EXPECT_EQ(ParseIoPair("8192x1", "w"), (IoPair{8192, 1}));
  EXPECT_EQ(ParseIoPair("1x1024", "w").Name(), "1x1024");
  for (const char* bad : {"8192", "x1", "8192x", "0x1", "8192X1", "8192x1x2", "-1x2", "1 x2", "a1x1", ""}) {
    EXPECT_THROW(ParseIoPair(bad, "w"), Error) << bad;
  }
}

TEST(CatalogTest, Errors) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"([{"prefix": "a", "path": "p"}, {"prefix": "a", "path": "q"}])",
       "entry 1 ('a'): duplicate prefix, already used by entry 0"},
      {R"([{"path": "p"}])", "entry 0: missing field 'prefix'"},
      {R"([{"prefix": "bad slug", "path": "p"}])", "entry 0: field 'prefix' must be a slug"},
      {R"([{"prefix": "a"}])", "entry 0 ('a'): missing field 'path'"},
      {R"([{"prefix": "a", "path": "p", "supported_input_output_pairs": ["1024-1024"]}])",
       "entry 0 ('a'): field 'supported_input_output_pairs': malformed input/output pair \"1024-1024\""},
      {R"([{"prefix": "a", "path": "p", "excluded_input_output_pairs": ["0x5"]}])",
       "entry 0 ('a'): field 'excluded_input_output_pairs': malformed input/output pair \"0x5\""},
      {R"([{"prefix": "a", "path": "p", "supported_concurrency_values_by_pair": {"1x1": [4, 0]}}])",
       "entry 0 ('a'): field 'supported_concurrency_values_by_pair'[\"1x1\"] has a non-positive concurrency 0"},
      {R"([{"prefix": "a", "path": "p", "supported_concurrency_values_by_pair": {"1by1": [4]}}])",
       "malformed input/output pair \"1by1\""},
      {R"([{"prefix": "a", "path": "p", "supported_concurrency_values": [-4]}])",
       "entry 0 ('a'): field 'supported_concurrency_values' has a non-positive concurrency -4"},
      {R"([{"prefix": "a", "path": "p", "supported_concurrency_values": [2.5]}])",
       "supported_concurrency_values' element 0 must be a positive integer"},
      {R"([{"prefix": "a", "path": "p", "case_extra_args_by_pair": {"8192": "--x"}}])",
       "entry 0 ('a'): field 'case_extra_args_by_pair': malformed input/output pair \"8192\""},
      {R"([{"prefix": "a", "path": "p", "case_env_vars_by_pair": {"1x1": "NOEQUALS"}}])",
       "entry 0 ('a'): field 'case_env_vars_by_pair'[\"1x1\"]: line 1 \"NOEQUALS\" is not NAME=VALUE"},
      {R"([{"prefix": "a", "path": "p", "env_vars": "1BAD=x"}])", "invalid variable name \"1BAD\""},
      {R"([{"prefix": "a", "path": "p", "extra_args": 5}])",
       "entry 0 ('a'): field 'extra_args' must be a string or a list of strings"},
      {R"([{"prefix": "a", "path": "p", "extra_args": ["--x", 5]}])", "field 'extra_args' element 1 must be a string"},
      {R"([{"prefix": "a", "path": "p", "workload_label": "SGLang-Other"}])",
       "entry 0 ('a'): field 'workload_label' must be \"SGLang-OOB\" or \"SGLang-Mesh\""},
      {R"([{"prefix": "a", "path": "p", "workload_label": "SGLang-Mesh"}])",
       "entry 0 ('a'): a SGLang-Mesh entry needs 'tp_size'"},
      {R"([{"prefix": "a", "path": "p", "tp_size": 0}])", "entry 0 ('a'): field 'tp_size' must be a positive integer"},
      {R"([{"prefix": "a", "path": "p", "dp_size": "2"}])", "field 'dp_size' must be a positive integer"},
      {R"({"templates": []})", "expected a 'models' list"},
      {R"({"models": [], "templates": {"extra_args": {"t": 1}}})", "template 't' must be a string or a list"},
      {R"({"models": [], "templates": 3})", "'templates' must be an object"},
      {R"("text")", "a catalog is a JSON array of entries or an object with 'models'"},
      {R"([3])", "entry 0: expected a JSON object"},
      {R"([{"prefix": "a", "path": "p", "case_extra_args_by_pair": {"1x1": "--a", "01x1": "--b"}}])",
       "lists pair 1x1 twice"},
  };
  for (const Case& c : cases) {
    const std::string error = TestCatalogError(c.json);
    EXPECT_THAT(error, HasSubstr(c.message)) << c.json;
    EXPECT_THAT(error, HasSubstr("test.json")) << c.json;
  }
}

TEST(CatalogTest, FileErrorsNameTheFile) {
  try {
    LoadCatalog("/nonexistent/catalog.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'/nonexistent/catalog.json' does not exist"));
  }
  try {
    ParseCatalog(ParseJson("[{", "bad.json"), "bad.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.json: invalid JSON"));
  }
}

TEST(CatalogTest, SuiteNames) {
  EXPECT_EQ(ParseSuite("OOB"), Suite::kOob);
  EXPECT_EQ(ParseSuite("mesh"), Suite::kMesh);
  EXPECT_THROW(ParseSuite("nightly"), Error);
}

}  // namespace
}  // namespace fission::catalog

namespace fission::catalog {
namespace {

// Every field of every entry replaced by values of every JSON type: parsing either succeeds or throws
// fission::Error, and expansion of whatever parsed never fails.
TEST(CatalogTest, MalformedValuesNeverCrash) {
  const Json original = ReadJsonFile(kFixtures + "catalog.json");
  const std::vector<Json> values = {Json(), 0, -1, 1.5, "", "x", "8192x1", Json::array(), Json::parse("[1, -2]"),
                                    Json::parse("[\"a\", 3]"), Json::object(), Json::parse("{\"1x1\": 5}"),
                                    Json::parse("{\"1x1\": [\"a\"]}"), true};
  int parsed = 0, rejected = 0;
  for (size_t m = 0; m < original["models"].size(); ++m) {
    for (const auto& [key, unused] : original["models"][m].items()) {
      for (const Json& v : values) {
        Json doc = original;
        doc["models"][m][key] = v;
        try {
          const Catalog c = ParseCatalog(doc, "fuzz.json");
          for (const ModelEntry& e : c.models) ExpandModel(e, nullptr);
          ++parsed;
        } catch (const Error&) {
          ++rejected;
        }
      }
    }
  }
  for (const char* key : {"templates", "models"}) {
    for (const Json& v : values) {
      Json doc = original;
      doc[key] = v;
      try {
        ParseCatalog(doc, "fuzz.json");
        ++parsed;
      } catch (const Error&) {
        ++rejected;
      }
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

}  // namespace
}  // namespace fission::catalog
