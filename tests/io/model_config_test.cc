#include <gtest/gtest.h>

#include "io/config_testlib.h"
#include "io/model_config.h"

namespace fission::io {
namespace {

Json Base() {
  return Json::parse(R"({
    "model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256, "num_experts_per_tok": 8,
    "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5, "norm_topk_prob": true,
    "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6,
    "rope_theta": 10000, "eos_token_id": 1,
    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128]}})");
}

std::string ErrorOf(const Json& j) { return ParseErrorOf(j); }

TEST(ModelConfig, ParsesDeepSeekV3) {
  const ModelConfig c = ParseModelConfig(Base(), "config.json");
  EXPECT_EQ(c.kv_lora_rank + c.qk_rope_head_dim, 576);
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_EQ(c.rope.factor, 40);
  EXPECT_EQ(c.quantization.method, "fp8");
  EXPECT_TRUE(c.IsMoeLayer(3));
  EXPECT_FALSE(c.IsMoeLayer(2));
  EXPECT_EQ(c.eos_token_ids, std::vector<std::int64_t>{1});
}

TEST(ModelConfig, ReadsTransformers5RopeParameters) {
  Json j = Base();
  j.erase("rope_scaling");
  j["rope_parameters"] = Json::parse(R"({"rope_type": "yarn", "rope_theta": 50000, "factor": 4,
      "original_max_position_embeddings": 64})");
  const ModelConfig c = ParseModelConfig(j, "config.json");
  EXPECT_EQ(c.rope.theta, 50000);
  EXPECT_EQ(c.rope.original_max_position_embeddings, 64);
}

TEST(ModelConfig, ErrorsNameTheField) {
  struct Case {
    const char* field;
    Json value;
    const char* mention;
  };
  const std::vector<Case> cases = {
      {"model_type", "llama", "unknown model_type 'llama'"},
      {"hidden_size", -1, "'hidden_size' must be positive"},
      {"hidden_size", "big", "'hidden_size' must be an integer"},
      {"n_group", 7, "divisible by n_group"},
      {"topk_group", 9, "topk_group"},
      {"hidden_act", "gelu", "hidden_act 'gelu'"},
      {"rope_scaling", Json::parse(R"({"type": "longrope", "factor": 2})"), "rope type 'longrope'"},
      {"quantization_config", Json::parse(R"({"quant_method": "awq"})"), "quant_method 'awq'"},
      {"quantization_config", Json::parse(R"({"quant_method": "fp8", "weight_block_size": [64, 64]})"),
       "[64, 64]"},
      {"num_experts_per_tok", 200, "num_experts_per_tok"},
  };
  for (const Case& c : cases) {
    Json j = Base();
    j[c.field] = c.value;
    const std::string err = ErrorOf(j);
    EXPECT_NE(err.find(c.mention), std::string::npos) << c.field << ": " << err;
    EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  }
  Json missing = Base();
  missing.erase("kv_lora_rank");
  EXPECT_NE(ErrorOf(missing).find("missing field 'kv_lora_rank'"), std::string::npos);
}

TEST(ModelConfig, ParsesSparseAttentionFields) {
  Json j = Base();
  j["model_type"] = "glm_moe_dsa";
  j["index_n_heads"] = 32;
  j["index_head_dim"] = 128;
  j["index_topk"] = 2048;
  const ModelConfig c = ParseModelConfig(j, "config.json");
  ASSERT_TRUE(c.indexer.has_value());
  EXPECT_EQ(c.indexer->topk, 2048);
  j.erase("index_topk");
  EXPECT_NE(ErrorOf(j).find("index_topk"), std::string::npos);
}

Json Sparse(const char* model_type) {
  Json j = Base();
  j["model_type"] = model_type;
  j["num_hidden_layers"] = 6;
  j["first_k_dense_replace"] = 1;
  j["index_n_heads"] = 32;
  j["index_head_dim"] = 128;
  j["index_topk"] = 2048;
  return j;
}

std::string FullLayers(const ModelConfig& c) {
  std::string out;
  for (bool full : c.indexer->full_layers) out += full ? 'F' : 'S';
  return out;
}

// IndexShare's layer kinds by transformers' precedence, and the indexer rope's family default.
TEST(ModelConfig, ReadsIndexShareLayers) {
  Json j = Sparse("glm_moe_dsa");
  EXPECT_EQ(FullLayers(ParseModelConfig(j, "config.json")), "FFFFFF");
  EXPECT_TRUE(ParseModelConfig(j, "config.json").indexer->rope_interleave);
  EXPECT_FALSE(ParseModelConfig(Sparse("deepseek_v32"), "config.json").indexer->rope_interleave);
  j["index_topk_freq"] = 2;  // offset 2 by default: full where max(i - 1, 0) is even
  EXPECT_EQ(FullLayers(ParseModelConfig(j, "config.json")), "FFSFSF");
  j["index_skip_topk_offset"] = 1;
  EXPECT_EQ(FullLayers(ParseModelConfig(j, "config.json")), "FSFSFS");
  j["index_topk_pattern"] = "FSSFFS";  // a pattern wins over the schedule
  EXPECT_EQ(FullLayers(ParseModelConfig(j, "config.json")), "FSSFFS");
  j["indexer_types"] = {"full", "full", "shared", "shared", "shared", "full"};  // and the list over both
  EXPECT_EQ(FullLayers(ParseModelConfig(j, "config.json")), "FFSSSF");
  j["indexer_rope_interleave"] = false;
  EXPECT_FALSE(ParseModelConfig(j, "config.json").indexer->rope_interleave);
}

TEST(ModelConfig, SparseAttentionErrorsNameTheField) {
  Json j = Sparse("glm_moe_dsa");
  j["indexer_types"] = {"full", "half"};
  EXPECT_NE(ErrorOf(j).find("'indexer_types' must be a list of num_hidden_layers (6) strings"), std::string::npos);
  j["indexer_types"] = {"full", "full", "half", "full", "full", "full"};
  EXPECT_NE(ErrorOf(j).find("indexer_types[2] is \"half\" (expected one of \"full\", \"shared\")"),
            std::string::npos)
      << ErrorOf(j);
  j["indexer_types"] = {"shared", "full", "full", "full", "full", "full"};
  EXPECT_NE(ErrorOf(j).find("layer 0 is a shared indexer layer"), std::string::npos);
  j.erase("indexer_types");
  j["index_topk_pattern"] = "FFXFFF";
  EXPECT_NE(ErrorOf(j).find("index_topk_pattern[2] is 'X'"), std::string::npos);
  j.erase("index_topk_pattern");
  j["q_lora_rank"] = nullptr;
  EXPECT_NE(ErrorOf(j).find("needs a query LoRA"), std::string::npos);
  j["q_lora_rank"] = 1536;
  j["index_head_dim"] = 32;
  j["qk_rope_head_dim"] = 64;
  EXPECT_NE(ErrorOf(j).find("index_head_dim (32) is smaller than qk_rope_head_dim (64)"), std::string::npos);
}

// mlp_layer_types decides which layers are MoE when present.
TEST(ModelConfig, ReadsMlpLayerTypes) {
  Json j = Sparse("deepseek_v32");
  j["mlp_layer_types"] = {"dense", "sparse", "dense", "sparse", "sparse", "sparse"};
  const ModelConfig c = ParseModelConfig(j, "config.json");
  EXPECT_FALSE(c.IsMoeLayer(0));
  EXPECT_TRUE(c.IsMoeLayer(1));
  EXPECT_FALSE(c.IsMoeLayer(2));
  j["mlp_layer_types"] = {"dense", "moe", "dense", "sparse", "sparse", "sparse"};
  EXPECT_NE(ErrorOf(j).find("mlp_layer_types[1] is \"moe\""), std::string::npos);
}

}  // namespace
}  // namespace fission::io
