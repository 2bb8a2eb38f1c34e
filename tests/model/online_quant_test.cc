// Online quantization (model/online_quant.h): the config's parsing and errors, ATOM's pattern
// semantics and resolution order over the model's modules, and tiny-deepseek-v3 loaded with each
// format against its golden (unquantized) logits.
#include "model/online_quant.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "io/model_config.h"
#include "model/fp8_testlib.h"
#include "model/runtime/model_loader.h"
#include "model/step_runner_testlib.h"

namespace fission::model {
namespace {

std::string Tiny() { return FixtureModelDir("tiny-deepseek-v3"); }

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

OnlineQuantPlan Plan(const std::string& extra) {
  std::vector<std::string> ignored;
  const auto config = ParseLoaderExtraConfig(extra, &ignored);
  EXPECT_TRUE(config.has_value()) << extra;
  return OnlineQuantPlan::Resolve(*config, QuantModules(io::LoadModelConfig(Tiny())), "test");
}

std::string FormatOf(const OnlineQuantPlan& plan, const std::string& module) {
  const auto f = plan.FormatOf(module);
  return f ? f->Name() : "source";
}

TEST(OnlineQuantPatterns, FollowAtomsSemantics) {
  EXPECT_TRUE(FnMatch("model.layers.3.mlp.experts", "model.layers.*.mlp.experts"));
  EXPECT_TRUE(FnMatch("model.layers.3.self_attn.q_a_proj", "*self_attn.[qk]_a_proj"));
  EXPECT_FALSE(FnMatch("model.layers.3.self_attn.kv_a_proj_with_mqa", "*self_attn.[!k]*"));
  EXPECT_TRUE(FnMatch("model.layers.3.mlp.gate", "*.mlp.gat?"));
  EXPECT_FALSE(FnMatch("model.layers.3.mlp.gate_proj", "*.mlp.gate"));
  // exclude_layer: exact, prefix, glob (and its sub-modules), re:, an experts module by an expert.
  EXPECT_TRUE(ExcludeMatches("lm_head", "lm_head"));
  EXPECT_TRUE(ExcludeMatches("model.layers.1.mlp.experts", "model.layers.1"));
  EXPECT_FALSE(ExcludeMatches("model.layers.10.mlp.experts", "model.layers.1"));
  EXPECT_TRUE(ExcludeMatches("model.layers.1.mlp.gate", "*.mlp.gate"));
  EXPECT_TRUE(ExcludeMatches("model.layers.1.mlp.shared_experts.up_proj", "*shared_experts"));
  EXPECT_TRUE(ExcludeMatches("model.layers.2.self_attn.o_proj", "re:layers\\.[0-2]\\.self_attn"));
  EXPECT_TRUE(ExcludeMatches("model.layers.2.mlp.experts", "model.layers.2.mlp.experts.5.down_proj"));
  // layer_quant_config: a glob, or a pattern that contains the module's name.
  EXPECT_TRUE(RuleMatches("model.layers.1.mlp.experts", "*experts*"));
  EXPECT_TRUE(RuleMatches("model.layers.1.mlp.experts", "model.layers.1.mlp.experts"));
  EXPECT_FALSE(RuleMatches("model.layers.1.mlp.experts", "model.layers.2.mlp.experts"));
  EXPECT_EQ(ModuleOfTensor("model.layers.1.mlp.experts.12.gate_proj.weight"), "model.layers.1.mlp.experts");
  EXPECT_EQ(ModuleOfTensor("model.layers.1.mlp.shared_experts.gate_proj.weight"), "model.layers.1.mlp.shared_experts.gate_proj");
}

TEST(OnlineQuantPlan, ExcludeFirstThenTheFirstMatchingRuleThenTheGlobal) {
  // The GLM-5.2 recipe's config, and an ordered pair of rules.
  const OnlineQuantPlan glm = Plan(
      R"({"online_quant_config":{"global_quant_config":"ptpc_fp8","layer_quant_config":{"model.layers.*.mlp.experts":"mxfp8"},"exclude_layer":["lm_head","model.embed_tokens","*.mlp.gate"]}})");
  EXPECT_EQ(FormatOf(glm, "model.layers.1.mlp.experts"), WeightFormat::Mxfp8().Name());
  EXPECT_EQ(FormatOf(glm, "model.layers.1.self_attn.q_a_proj"), WeightFormat::Fp8PerChannel().Name());
  EXPECT_EQ(FormatOf(glm, "model.layers.0.mlp.down_proj"), WeightFormat::Fp8PerChannel().Name());
  EXPECT_EQ(FormatOf(glm, "lm_head"), "source");
  EXPECT_EQ(FormatOf(glm, "model.layers.1.mlp.gate"), "source");
  EXPECT_EQ(FormatOf(glm, "model.layers.1.self_attn.kv_b_proj"), "source");  // never quantized
  const OnlineQuantPlan ordered = Plan(
      R"({"online_quant_config":{"global_quant_config":"MXFP4","layer_quant_config":{"*layers.2.mlp.experts":"mxfp8","*experts*":"per_block_fp8"},"exclude_layer":"re:layers\\.1\\.mlp\\.experts"}})");
  EXPECT_EQ(FormatOf(ordered, "model.layers.2.mlp.experts"), WeightFormat::Mxfp8().Name());
  EXPECT_EQ(FormatOf(ordered, "model.layers.2.mlp.shared_experts.up_proj"), WeightFormat::Fp8Block128().Name());
  EXPECT_EQ(FormatOf(ordered, "model.layers.1.mlp.experts"), "source");
  EXPECT_EQ(FormatOf(ordered, "model.layers.1.self_attn.o_proj"), WeightFormat::Mxfp4().Name());
  EXPECT_NE(ordered.Summary().find("source precision"), std::string::npos);
}

TEST(OnlineQuantPlan, BadConfigsAreOneErrorNamingEveryProblem) {
  std::vector<std::string> ignored;
  EXPECT_NE(ErrorOf([&] { ParseLoaderExtraConfig(R"({"online_quant_config": {)", &ignored); })
                .find("--model-loader-extra-config"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { ParseLoaderExtraConfig(R"({"online_quant_config": {"global": "mxfp4"}})", &ignored); })
                .find("unknown key 'global'"),
            std::string::npos);
  const std::string all = ErrorOf([] {
    Plan(R"({"online_quant_config":{"global_quant_config":"mxi4","layer_quant_config":{"*nowhere*":"mxfp8"},"exclude_layer":["lm_heads","re:("]}})");
  });
  for (const char* part : {"'mxi4'", "'*nowhere*' matches no module", "'lm_heads' matches no module", "'re:('"})
    EXPECT_NE(all.find(part), std::string::npos) << part << " in " << all;
  EXPECT_NE(ErrorOf([] {
              Plan(R"({"online_quant_config":{"global_quant_config":"mxfp4","layer_quant_config":{"*mlp.up_proj":"mxfp8"}}})");
            }).find("one stacked matrix"),
            std::string::npos);
  ParseLoaderExtraConfig(R"({"enable_multithread_load": true})", &ignored);
  EXPECT_EQ(ignored, std::vector<std::string>{"enable_multithread_load"});
}

TEST(OnlineQuantPlan, DevicesRefuseFormatsTheyHaveNoKernelsForBeforeReadingWeights) {
  LoadOptions options;
  options.device = "cuda";
  options.model_loader_extra_config = R"({"online_quant_config":{"global_quant_config":"mxfp4"}})";
  const std::string e = ErrorOf([&] { LoadCausalLM(Tiny(), options); });
  EXPECT_NE(e.find("F4 1x32"), std::string::npos) << e;
  EXPECT_NE(e.find("CUDA backend"), std::string::npos) << e;
  options.model_loader_extra_config.clear();
  options.device = "cpu";
  options.quantization = "fp8";
  EXPECT_NE(ErrorOf([&] { LoadCausalLM(FixtureModelDir("tiny-deepseek-v3-mxfp4"), options); }).find("quark"),
            std::string::npos);
}

// mxfp4 and mxfp8 on the routed experts pass the device check (the CUDA backend has their
// kernels): what stops this load is the host (no device or no CUDA build), not the plan.
TEST(OnlineQuantPlan, CudaTakesMxFormatsOnTheRoutedExperts) {
  for (const std::string format : {"mxfp4", "mxfp8"}) {
    LoadOptions options;
    options.device = "cuda";
    options.model_loader_extra_config =
        R"({"online_quant_config":{"layer_quant_config":{"model.layers.*.mlp.experts":")" + format + R"("}}})";
    const std::string e = ErrorOf([&] { LoadCausalLM(Tiny(), options); });
    EXPECT_EQ(e.find("has no kernels"), std::string::npos) << format << ": " << e;
    options.model_loader_extra_config =
        R"({"online_quant_config":{"layer_quant_config":{"model.layers.*.mlp.shared_experts.*":")" + format +
        R"("}}})";
    const std::string shared = ErrorOf([&] { LoadCausalLM(Tiny(), options); });
    EXPECT_NE(shared.find("shared_experts"), std::string::npos) << format << ": " << shared;
    EXPECT_NE(shared.find("has no kernels"), std::string::npos) << format << ": " << shared;
  }
}

struct FormatCase {
  const char* name;
  std::string extra, quantization;
  double median_bound, greedy_fraction;
};

// Logit error of each format on the random tiny model against its golden logits. Bounds are the
// measured values (docs/benchmarks.md) with headroom; random weights have no outliers to protect,
// so e2m1's 1-bit mantissa on weights and activations moves every row.
TEST(OnlineQuantModel, EachFormatStaysWithinItsBoundOfTheUnquantizedModel) {
  const std::string experts = R"("layer_quant_config":{"model.layers.*.mlp.experts":"mxfp4"},)";
  const std::vector<FormatCase> cases = {
      {"ptpc_fp8", R"({"online_quant_config":{"global_quant_config":"ptpc_fp8"}})", "", 0.15, 0.7},
      {"per_block128_fp8", R"({"online_quant_config":{"global_quant_config":"per_block128_fp8"}})", "", 0.15, 0.6},
      {"--quantization fp8", "", "fp8", 0.15, 0.6},
      {"mxfp8", R"({"online_quant_config":{"global_quant_config":"mxfp8"}})", "", 0.17, 0.6},
      {"mxfp4", R"({"online_quant_config":{"global_quant_config":"mxfp4"}})", "", 0.6, 0.25},
      {"mxfp4 experts", R"({"online_quant_config":{)" + experts + R"("exclude_layer":["lm_head"]}})", "", 0.3, 0.5},
  };
  for (const FormatCase& c : cases) {
    LoadOptions options;
    options.model_loader_extra_config = c.extra;
    options.quantization = c.quantization;
    auto model = LoadCausalLM(Tiny(), options);
    const Fp8Comparison r = CompareWithGolden(*model, Tiny());
    std::printf("%-20s median rel L2 %.4f worst %.4f rows>0.2 %d/%d greedy %d/%d\n", c.name, r.median, r.worst,
                r.outliers, r.rows, r.greedy_same, r.greedy_steps);
    EXPECT_GT(r.median, 1e-4) << c.name << ": nothing was quantized";
    EXPECT_LE(r.median, c.median_bound) << c.name;
    EXPECT_GE(r.greedy_same, c.greedy_fraction * r.greedy_steps) << c.name;
  }
}

}  // namespace
}  // namespace fission::model
