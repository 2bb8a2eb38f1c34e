// DeepSeek-V4's config.json fields (io/model_config.h, V4Config). Two spellings exist:
// transformers' (layer_types + compress_rates, mlp_layer_types, rope_parameters {main, compress}),
// which its save_pretrained writes, and DeepSeek's published configs (compress_ratios per layer,
// num_hash_layers, rope_theta / compress_rope_theta / rope_scaling). Both give the same V4Config.
#include <algorithm>

#include "io/config_fields.h"

namespace fission::io {
namespace {

constexpr const char* kSliding = "sliding_attention";
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";

// Per layer, the attention kind and the positions per compressed entry.
void ParseLayerTypes(const Json& json, const std::string& where, std::int64_t layers, V4Config& v4) {
  std::int64_t csa_rate = GetInt(json, "compress_rate_csa", where, 4);
  std::int64_t hca_rate = GetInt(json, "compress_rate_hca", where, 128);
  if (auto rates = json.find("compress_rates"); rates != json.end() && !rates->is_null()) {
    if (!rates->is_object()) Fail(where, ": field 'compress_rates' must be an object");
    csa_rate = GetInt(*rates, kCsa, where + ": compress_rates", csa_rate);
    hca_rate = GetInt(*rates, kHca, where + ": compress_rates", hca_rate);
  }
  RequirePositive(csa_rate, "compress_rates.compressed_sparse_attention", where);
  RequirePositive(hca_rate, "compress_rates.heavily_compressed_attention", where);
  auto add = [&](V4Attention kind) {
    v4.attention.push_back(kind);
    v4.compress_ratio.push_back(kind == V4Attention::kCsa ? csa_rate : kind == V4Attention::kHca ? hca_rate : 0);
  };
  if (auto types = GetLayerList(json, "layer_types", where, layers, {kSliding, kCsa, kHca})) {
    for (const std::string& t : *types) add(t == kCsa ? V4Attention::kCsa : t == kHca ? V4Attention::kHca : V4Attention::kSliding);
    return;
  }
  if (auto ratios = json.find("compress_ratios"); ratios != json.end() && !ratios->is_null()) {
    // Published configs list one ratio per layer and one more for the MTP layer.
    if (!ratios->is_array() || static_cast<std::int64_t>(ratios->size()) < layers)
      Fail(where, ": field 'compress_ratios' must list at least num_hidden_layers (", layers, ") ratios");
    for (std::int64_t i = 0; i < layers; ++i) {
      const Json& r = (*ratios)[static_cast<std::size_t>(i)];
      if (!r.is_number_integer() || r.get<std::int64_t>() < 0)
        Fail(where, ": compress_ratios[", i, "] is ", r.dump(), " (expected 0 or a positive ratio)");
      // As DeepSeek's reference builds it: ratio 4 overlaps its windows and has the indexer.
      const std::int64_t ratio = r.get<std::int64_t>();
      v4.attention.push_back(ratio == 0 ? V4Attention::kSliding : ratio == 4 ? V4Attention::kCsa : V4Attention::kHca);
      v4.compress_ratio.push_back(ratio);
    }
    return;
  }
  // transformers' default (V4-Pro's schedule): two HCA layers, then CSA and HCA in turn.
  for (std::int64_t i = 0; i < layers; ++i)
    add(i < 2 || i % 2 == 0 ? V4Attention::kHca : V4Attention::kCsa);
}

void ParseHashLayers(const Json& json, const std::string& where, std::int64_t layers, V4Config& v4) {
  if (auto types = GetLayerList(json, "mlp_layer_types", where, layers, {"hash_moe", "moe"})) {
    for (const std::string& t : *types) v4.hash_routed.push_back(t == "hash_moe");
    return;
  }
  const std::int64_t hashed = GetInt(json, "num_hash_layers", where, 3);
  if (hashed < 0) Fail(where, ": field 'num_hash_layers' must not be negative");
  for (std::int64_t i = 0; i < layers; ++i) v4.hash_routed.push_back(i < hashed);
}

// The two ropes: plain for sliding-window layers, compress_rope_theta (+ YaRN) for the others. The
// compressed layers' YaRN does not scale cos and sin (attention_factor 1 unless the config says).
void ParseRopes(const Json& json, const std::string& where, V4Config& v4) {
  const double main_theta = GetDouble(json, "rope_theta", where, 10000.0);
  const double compress_theta = GetDouble(json, "compress_rope_theta", where, 160000.0);
  const Json* nested = nullptr;
  if (auto rp = json.find("rope_parameters"); rp != json.end() && rp->is_object() && rp->contains("main") &&
                                              rp->contains("compress"))
    nested = &*rp;
  if (nested != nullptr) {
    v4.main_rope = ParseRopeParams((*nested)["main"], where + ": rope_parameters.main", main_theta);
    v4.compress_rope = ParseRopeParams((*nested)["compress"], where + ": rope_parameters.compress", compress_theta);
  } else {
    v4.main_rope.theta = main_theta;
    v4.compress_rope.theta = compress_theta;
    for (const char* key : {"rope_scaling", "rope_parameters"}) {
      auto it = json.find(key);
      if (it == json.end() || it->is_null()) continue;
      if (!it->is_object()) Fail(where, ": field '", key, "' must be an object or null");
      v4.compress_rope = ParseRopeParams(*it, StrCat(where, ": ", key), compress_theta);
      v4.compress_rope.theta = compress_theta;  // the compressed layers' own base
      break;
    }
  }
  if (v4.compress_rope.type == "yarn" && !v4.compress_rope.attention_factor) v4.compress_rope.attention_factor = 1.0;
}

void CheckV4(const ModelConfig& c, const std::string& where) {
  const V4Config& v4 = *c.v4;
  for (auto [value, name] : {std::pair{v4.head_dim, "head_dim"}, {v4.sliding_window, "sliding_window"},
                             {v4.hc_mult, "hc_mult"}, {v4.o_groups, "o_groups"}, {v4.o_lora_rank, "o_lora_rank"},
                             {c.q_lora_rank, "q_lora_rank"}, {c.qk_rope_head_dim, "qk_rope_head_dim"}})
    RequirePositive(value, name, where);
  if (v4.hc_sinkhorn_iters < 1) Fail(where, ": field 'hc_sinkhorn_iters' must be at least 1");
  if (c.qk_rope_head_dim % 2 != 0 || c.qk_rope_head_dim > v4.head_dim)
    Fail(where, ": the rope part (", c.qk_rope_head_dim, ") must be even and at most head_dim (", v4.head_dim, ")");
  if (c.num_attention_heads % v4.o_groups != 0)
    Fail(where, ": num_attention_heads (", c.num_attention_heads, ") must be divisible by o_groups (", v4.o_groups, ")");
  if (v4.swiglu_limit < 0) Fail(where, ": field 'swiglu_limit' must not be negative");
  // One cache class per layer kind holds every such layer's entries: one ratio per kind.
  for (V4Attention kind : {V4Attention::kCsa, V4Attention::kHca}) {
    std::int64_t ratio = 0;
    for (std::size_t i = 0; i < v4.attention.size(); ++i) {
      if (v4.attention[i] != kind) continue;
      if (ratio != 0 && v4.compress_ratio[i] != ratio)
        Fail(where, ": ", kind == V4Attention::kCsa ? "CSA" : "HCA", " layers with different compress ratios (",
             ratio, " and ", v4.compress_ratio[i], " at layer ", i, ") are not supported");
      ratio = v4.compress_ratio[i];
    }
  }
  // The CSA indexer rotates the trailing rope dims of its queries and keys.
  const bool has_csa = std::find(v4.attention.begin(), v4.attention.end(), V4Attention::kCsa) != v4.attention.end();
  if (has_csa && c.indexer->head_dim < c.qk_rope_head_dim)
    Fail(where, ": index_head_dim (", c.indexer->head_dim, ") is smaller than the rope part (", c.qk_rope_head_dim,
         "), which the CSA indexer rotates");
}

}  // namespace

void ParseV4(const Json& json, const std::string& where, ModelConfig& c) {
  V4Config v4;
  v4.head_dim = GetInt(json, "head_dim", where, 512);
  v4.sliding_window = GetInt(json, "sliding_window", where, 128);
  v4.hc_mult = GetInt(json, "hc_mult", where, 4);
  v4.hc_sinkhorn_iters = static_cast<std::int32_t>(GetInt(json, "hc_sinkhorn_iters", where, 20));
  v4.hc_eps = GetDouble(json, "hc_eps", where, 1e-6);
  v4.o_groups = GetInt(json, "o_groups", where, 8);
  v4.o_lora_rank = GetInt(json, "o_lora_rank", where, 1024);
  v4.swiglu_limit = GetDouble(json, "swiglu_limit", where, 10.0);
  ParseLayerTypes(json, where, c.num_hidden_layers, v4);
  ParseHashLayers(json, where, c.num_hidden_layers, v4);
  ParseRopes(json, where, v4);
  c.q_lora_rank = GetInt(json, "q_lora_rank", where, 1024);
  const auto rope_dims = GetOptionalInt(json, "qk_rope_head_dim", where);
  c.qk_rope_head_dim =
      rope_dims ? *rope_dims
                : static_cast<std::int64_t>(static_cast<double>(v4.head_dim) *
                                            GetDouble(json, "partial_rotary_factor", where, 64.0 / 512.0));
  c.qk_nope_head_dim = v4.head_dim - c.qk_rope_head_dim;
  c.v_head_dim = v4.head_dim;
  c.v4 = std::move(v4);
}

void CheckV4Fits(const ModelConfig& c, const std::string& where) { CheckV4(c, where); }

}  // namespace fission::io
