// config.json of the DeepSeek family, parsed into typed fields.
//
// deepseek_v3 (and kimi_k2, which uses the same architecture) is fully described here. The fields
// of deepseek_v32 and glm_moe_dsa (DeepSeek Sparse Attention's indexer) and of deepseek_v4 are
// parsed too, so that the model registry can say precisely what is not supported yet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace fission::io {

struct RopeConfig {
  std::string type = "default";  // "default" or "yarn"
  double theta = 10000.0;
  double factor = 1.0;
  std::int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0: absent
  double mscale_all_dim = 0.0;  // 0: absent
  std::optional<double> attention_factor;
  bool truncate = true;
};

struct QuantizationConfig {
  std::string method;  // "" (none), "fp8" (DeepSeek's 128x128 blocks) or "quark" (MXFP4)
  std::int64_t block_rows = 128;
  std::int64_t block_cols = 128;
  std::string activation_scheme = "dynamic";
  // quark: the modules the checkpoint left unquantized (`exclude`), and the activations its
  // products were calibrated with: "fp4" (dynamic MXFP4) or "none".
  std::vector<std::string> exclude;
  std::string activations = "none";
  // DeepSeek-V4: how the config says the routed experts are stored (`expert_dtype`, at the top
  // level as DeepSeek publishes it, or inside quantization_config): "fp4" (e2m1 pairs with a ue8m0
  // scale per 32 values), "fp8", ...; "" when it says nothing. Tensors are read as they are
  // stored whatever it says; it decides what dummy experts are drawn as.
  std::string expert_dtype;
};

// DeepSeek Sparse Attention indexer (deepseek_v32, glm_moe_dsa, deepseek_v4).
struct IndexerConfig {
  std::int64_t n_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t topk = 0;
  // The rope part (the first qk_rope_head_dim dims of q and k) in interleaved pairs: GLM-5's
  // layout (`indexer_rope_interleave`, on by default for glm_moe_dsa); DeepSeek-V3.2 half-splits.
  bool rope_interleave = false;
  // IndexShare (GLM-5.2): per layer, whether it runs its own indexer ("full") or reuses the top-k
  // of the latest full layer ("shared"). From `indexer_types`, else `index_topk_pattern` ("FSS…"),
  // else `index_topk_freq` / `index_skip_topk_offset`; every layer is full without them.
  std::vector<bool> full_layers;
};

// DeepSeek-V4's attention per layer: a sliding window only, or the window plus entries compressed
// from windows of positions: CSA (overlapping windows, chosen per query by a lightning indexer)
// or HCA (every complete entry visible).
enum class V4Attention : std::uint8_t { kSliding, kCsa, kHca };

// DeepSeek-V4 specifics. Read from transformers' fields (layer_types with compress_rates,
// mlp_layer_types, rope_parameters {main, compress}) or from those of DeepSeek's published configs
// (compress_ratios, num_hash_layers, rope_theta / compress_rope_theta / rope_scaling).
struct V4Config {
  std::int64_t head_dim = 0;  // of every query head and of the one shared KV head
  std::int64_t sliding_window = 0;
  std::int64_t hc_mult = 0;
  std::int32_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  std::int64_t o_groups = 0;
  std::int64_t o_lora_rank = 0;
  double swiglu_limit = 0.0;  // 0: no clamp
  std::vector<V4Attention> attention;          // per layer
  std::vector<std::int64_t> compress_ratio;    // per layer: positions per entry (0: sliding only)
  std::vector<bool> hash_routed;               // per layer: experts from tid2eid[token]
  RopeConfig main_rope;      // sliding-window layers
  RopeConfig compress_rope;  // CSA/HCA layers, their compressors and the indexer
};

struct ModelConfig {
  std::string source;  // the file (or description) it came from, for messages
  std::string model_type;
  std::vector<std::string> architectures;

  std::int64_t vocab_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  std::optional<std::int64_t> bos_token_id;
  std::vector<std::int64_t> eos_token_ids;

  // Multi-head latent attention.
  std::int64_t q_lora_rank = 0;  // 0: no query LoRA (q_proj)
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
  bool rope_interleave = true;
  RopeConfig rope;

  // DeepSeekMoE.
  std::int64_t n_routed_experts = 0;
  std::int64_t n_shared_experts = 0;
  std::int64_t num_experts_per_tok = 0;
  std::int64_t moe_intermediate_size = 0;
  std::int64_t n_group = 1;
  std::int64_t topk_group = 1;
  std::int64_t first_k_dense_replace = 0;
  std::int64_t moe_layer_freq = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  std::string scoring_func = "sigmoid";
  std::string topk_method = "noaux_tc";

  // Per layer, whether its feed-forward is DeepSeekMoE (`mlp_layer_types`: "sparse"); empty when
  // the config has no list, and first_k_dense_replace / moe_layer_freq decide.
  std::vector<bool> moe_layers;

  // Multi-token prediction: NextN layers the checkpoint carries after its decoder layers
  // (`model.layers.{num_hidden_layers + i}.*`), the draft layers of speculative decoding.
  std::int64_t num_nextn_predict_layers = 0;

  QuantizationConfig quantization;
  std::optional<IndexerConfig> indexer;
  std::optional<V4Config> v4;

  std::int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool IsMoeLayer(std::int64_t layer) const {
    if (!moe_layers.empty()) return moe_layers[static_cast<std::size_t>(layer)];
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
};

// Parses and validates; every problem is an Error naming `source` and the field.
ModelConfig ParseModelConfig(const Json& json, const std::string& source);
// Reads `dir`/config.json, applying `override_json` (a JSON object merged over it, as
// --json-model-override-args does) when not empty.
ModelConfig LoadModelConfig(const std::string& dir, const std::string& override_json = "");

// The model types the parser knows.
const std::vector<std::string>& KnownModelTypes();

}  // namespace fission::io
