// DeepSeek-V4's config fields in both spellings: transformers' (what the tiny fixture's
// save_pretrained wrote) and DeepSeek's published one (bench/configs/deepseek-v4-flash).
#include <gtest/gtest.h>

#include "io/config_testlib.h"
#include "io/model_config.h"

namespace fission::io {
namespace {

std::string Dir(const char* rel) { return std::string(FISSION_SOURCE_DIR) + rel; }

std::string ErrorOf(const Json& j) { return ParseErrorOf(j); }

// The published spelling of tests/fixtures/models/tiny-deepseek-v4/config.json.
Json PublishedTiny() {
  Json j = ReadJsonFile(Dir("/tests/fixtures/models/tiny-deepseek-v4/config.json"));
  for (const char* k : {"layer_types", "compress_rates", "mlp_layer_types", "rope_parameters", "partial_rotary_factor"})
    j.erase(k);
  j["compress_ratios"] = {0, 4, 16, 4, 0};  // one more for the MTP layer, as published configs list
  j["num_hash_layers"] = 1;
  j["qk_rope_head_dim"] = 8;
  j["rope_scaling"] = Json::parse(
      R"({"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32, "beta_fast": 32, "beta_slow": 1})");
  return j;
}

void ExpectSameRope(const RopeConfig& a, const RopeConfig& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.theta, b.theta);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.original_max_position_embeddings, b.original_max_position_embeddings);
  EXPECT_EQ(a.beta_fast, b.beta_fast);
  EXPECT_EQ(a.beta_slow, b.beta_slow);
  EXPECT_EQ(a.attention_factor, b.attention_factor);
}

TEST(V4Config, BothSpellingsGiveTheSameModel) {
  const ModelConfig t = LoadModelConfig(Dir("/tests/fixtures/models/tiny-deepseek-v4"));
  const ModelConfig p = ParseModelConfig(PublishedTiny(), "published");
  ASSERT_TRUE(t.v4 && p.v4);
  EXPECT_EQ(t.v4->attention, (std::vector<V4Attention>{V4Attention::kSliding, V4Attention::kCsa, V4Attention::kHca,
                                                       V4Attention::kCsa}));
  EXPECT_EQ(t.v4->compress_ratio, (std::vector<std::int64_t>{0, 4, 16, 4}));
  EXPECT_EQ(t.v4->hash_routed, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(p.v4->attention, t.v4->attention);
  EXPECT_EQ(p.v4->compress_ratio, t.v4->compress_ratio);
  EXPECT_EQ(p.v4->hash_routed, t.v4->hash_routed);
  ExpectSameRope(p.v4->main_rope, t.v4->main_rope);
  ExpectSameRope(p.v4->compress_rope, t.v4->compress_rope);
  EXPECT_EQ(t.v4->compress_rope.type, "yarn");
  EXPECT_EQ(t.v4->compress_rope.theta, 160000.0);
  EXPECT_EQ(t.v4->compress_rope.attention_factor, 1.0);  // V4's YaRN does not scale cos and sin
  EXPECT_EQ(t.v4->main_rope.type, "default");
  for (const ModelConfig* c : {&t, &p}) {
    EXPECT_EQ(c->qk_rope_head_dim, 8);
    EXPECT_EQ(c->v4->head_dim, 32);
    EXPECT_EQ(c->v4->sliding_window, 8);
    EXPECT_EQ(c->v4->swiglu_limit, 1.0);
    EXPECT_EQ(c->v4->o_groups, 2);
    EXPECT_EQ(c->scoring_func, "sqrtsoftplus");
    EXPECT_EQ(c->indexer->n_heads, 16);
  }
}

TEST(V4Config, ReadsThePublishedFlashConfig) {
  const ModelConfig c = LoadModelConfig(Dir("/bench/configs/deepseek-v4-flash"));
  ASSERT_TRUE(c.v4);
  ASSERT_EQ(c.v4->attention.size(), 43u);
  EXPECT_EQ(c.v4->attention[0], V4Attention::kSliding);
  EXPECT_EQ(c.v4->attention[2], V4Attention::kCsa);
  EXPECT_EQ(c.v4->compress_ratio[3], 128);
  EXPECT_EQ(c.v4->attention[42], V4Attention::kCsa);
  EXPECT_EQ(std::count(c.v4->hash_routed.begin(), c.v4->hash_routed.end(), true), 3);
  EXPECT_EQ(c.v4->compress_rope.original_max_position_embeddings, 65536);
  EXPECT_EQ(c.v4->compress_rope.factor, 16.0);
  EXPECT_EQ(c.qk_nope_head_dim, 448);
}

// V4-Pro (bench/configs/deepseek-v4-pro): 61 layers, no sliding-only layer in the main stack
// (layers 0 and 1 are HCA, then CSA and HCA alternate), the MTP layer's ratio last in the list.
TEST(V4Config, ReadsTheProConfig) {
  const ModelConfig c = LoadModelConfig(Dir("/bench/configs/deepseek-v4-pro"));
  ASSERT_TRUE(c.v4);
  ASSERT_EQ(c.v4->attention.size(), 61u);
  EXPECT_EQ(std::count(c.v4->attention.begin(), c.v4->attention.end(), V4Attention::kSliding), 0);
  EXPECT_EQ(std::count(c.v4->attention.begin(), c.v4->attention.end(), V4Attention::kCsa), 30);
  EXPECT_EQ(c.v4->attention[0], V4Attention::kHca);
  EXPECT_EQ(c.v4->attention[1], V4Attention::kHca);
  EXPECT_EQ(c.v4->attention[2], V4Attention::kCsa);
  EXPECT_EQ(c.v4->attention[60], V4Attention::kCsa);
  EXPECT_EQ(std::count(c.v4->hash_routed.begin(), c.v4->hash_routed.end(), true), 3);
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.num_attention_heads, 128);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.v4->o_groups, 16);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.moe_intermediate_size, 3072);
  EXPECT_EQ(c.indexer->topk, 1024);
  EXPECT_EQ(c.qk_nope_head_dim, 448);
}

TEST(V4Config, BadFieldsAreNamed) {
  Json j = PublishedTiny();
  j["compress_ratios"] = {0, 4};
  EXPECT_NE(ErrorOf(j).find("'compress_ratios' must list at least num_hidden_layers (4)"), std::string::npos)
      << ErrorOf(j);
  j = PublishedTiny();
  j["compress_ratios"] = {0, -4, 16, 4};
  EXPECT_NE(ErrorOf(j).find("compress_ratios[1] is -4"), std::string::npos) << ErrorOf(j);
  j = PublishedTiny();
  j["o_groups"] = 3;
  EXPECT_NE(ErrorOf(j).find("divisible by o_groups (3)"), std::string::npos) << ErrorOf(j);
  j = PublishedTiny();
  j["scoring_func"] = "sigmoid";
  EXPECT_NE(ErrorOf(j).find("scoring_func 'sigmoid' is not supported for deepseek_v4 (supported: sqrtsoftplus)"),
            std::string::npos)
      << ErrorOf(j);
  j = PublishedTiny();
  j["qk_rope_head_dim"] = 24;  // wider than index_head_dim (16)
  EXPECT_NE(ErrorOf(j).find("index_head_dim (16) is smaller than the rope part (24)"), std::string::npos) << ErrorOf(j);
  j = ReadJsonFile(Dir("/tests/fixtures/models/tiny-deepseek-v4/config.json"));
  j["layer_types"] = {"sliding_attention", "dense"};
  EXPECT_NE(ErrorOf(j).find("'layer_types' must be a list of num_hidden_layers (4) strings"), std::string::npos)
      << ErrorOf(j);
  j["layer_types"] = {"sliding_attention", "dense", "sliding_attention", "sliding_attention"};
  EXPECT_NE(ErrorOf(j).find("layer_types[1] is \"dense\""), std::string::npos) << ErrorOf(j);
}

}  // namespace
}  // namespace fission::io
