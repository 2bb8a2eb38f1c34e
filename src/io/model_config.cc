#include "io/model_config.h"

#include <algorithm>

#include "base/mapped_file.h"
#include "io/config_fields.h"

namespace fission::io {

void RequirePositive(std::int64_t value, const char* field, const std::string& where) {
  if (value <= 0) Fail(where, ": field '", field, "' must be positive, got ", value);
}

// A per-layer list of strings, each one of `allowed`; nullopt when absent or null.
std::optional<std::vector<std::string>> GetLayerList(const Json& json, const char* field, const std::string& where,
                                                     std::int64_t layers,
                                                     std::initializer_list<const char*> allowed) {
  auto it = json.find(field);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (!it->is_array() || static_cast<std::int64_t>(it->size()) != layers)
    Fail(where, ": field '", field, "' must be a list of num_hidden_layers (", layers, ") strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const Json& v = (*it)[i];
    const bool ok = v.is_string() && std::any_of(allowed.begin(), allowed.end(),
                                                  [&](const char* a) { return v.get<std::string>() == a; });
    if (!ok) {
      std::string names;
      for (const char* a : allowed) names += StrCat(names.empty() ? "" : ", ", "\"", a, "\"");
      Fail(where, ": ", field, "[", i, "] is ", v.dump(), " (expected one of ", names, ")");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

RopeConfig ParseRopeParams(const Json& params, const std::string& params_where, double theta) {
  RopeConfig rope;
  rope.theta = GetDouble(params, "rope_theta", params_where, theta);
  rope.type = GetString(params, "rope_type", params_where, GetString(params, "type", params_where, "default"));
  if (rope.type == "default") return rope;
  if (rope.type != "yarn")
    Fail(params_where, ": rope type '", rope.type, "' is not supported (supported: default, yarn)");
  rope.factor = GetDouble(params, "factor", params_where);
  rope.original_max_position_embeddings = GetInt(params, "original_max_position_embeddings", params_where);
  rope.beta_fast = GetDouble(params, "beta_fast", params_where, 32.0);
  rope.beta_slow = GetDouble(params, "beta_slow", params_where, 1.0);
  rope.mscale = GetDouble(params, "mscale", params_where, 0.0);
  rope.mscale_all_dim = GetDouble(params, "mscale_all_dim", params_where, 0.0);
  if (params.contains("attention_factor") && !params["attention_factor"].is_null())
    rope.attention_factor = GetDouble(params, "attention_factor", params_where);
  rope.truncate = GetBool(params, "truncate", params_where, true);
  if (rope.factor <= 0) Fail(params_where, ": 'factor' must be positive");
  RequirePositive(rope.original_max_position_embeddings, "original_max_position_embeddings", params_where);
  return rope;
}

namespace {

RopeConfig ParseRope(const Json& json, const std::string& where) {
  const double theta = GetDouble(json, "rope_theta", where, 10000.0);
  // transformers 5 writes `rope_parameters` (with rope_theta inside); published checkpoints carry
  // `rope_scaling` (null for plain rope) next to a top-level `rope_theta`.
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto it = json.find(key);
    if (it != json.end() && !it->is_null()) {
      if (!it->is_object()) Fail(where, ": field '", key, "' must be an object or null");
      return ParseRopeParams(*it, StrCat(where, ": ", key), theta);
    }
  }
  RopeConfig rope;
  rope.theta = theta;
  return rope;
}

// Problems with one Quark tensor spec (`weight` or `input_tensors`) against OCP MXFP4: fp4 codes,
// per_group of 32, e8m0 scales; weights static, activations dynamic.
void CheckMxfp4Spec(const Json& spec, const std::string& where, bool dynamic, std::vector<std::string>* problems) {
  auto expect = [&](const char* key, const Json& want) {
    const auto it = spec.find(key);
    if (it == spec.end() || *it != want)
      problems->push_back(StrCat(where, ".", key, " is ", it == spec.end() ? "missing" : it->dump(), ", expected ",
                                 want.dump()));
  };
  if (!spec.is_object()) {
    problems->push_back(StrCat(where, " must be an object"));
    return;
  }
  expect("dtype", "fp4");
  expect("qscheme", "per_group");
  expect("group_size", 32);
  expect("scale_format", "e8m0");
  expect("is_dynamic", dynamic);
}

// Quark's export of an MXFP4 model (amd/DeepSeek-R1-0528-MXFP4): global_quant_config with a
// `weight` spec (and `input_tensors`, null for weight-only), layer_quant_config overrides (which must
// be MXFP4 too: one checkpoint format), and the `exclude` list of modules kept in bf16.
void ParseQuark(const Json& q_json, const std::string& qwhere, QuantizationConfig& q) {
  std::vector<std::string> problems;
  const auto global = q_json.find("global_quant_config");
  if (global == q_json.end() || !global->is_object()) Fail(qwhere, ": 'global_quant_config' must be an object");
  std::vector<std::pair<std::string, const Json*>> specs = {{"global_quant_config", &*global}};
  if (const auto layers = q_json.find("layer_quant_config"); layers != q_json.end() && !layers->is_null()) {
    if (!layers->is_object()) Fail(qwhere, ": 'layer_quant_config' must be an object");
    for (const auto& [pattern, spec] : layers->items()) specs.push_back({"layer_quant_config." + pattern, &spec});
  }
  bool fp4_activations = false;
  for (const auto& [name, spec] : specs) {
    if (!spec->is_object()) Fail(qwhere, ".", name, " must be an object");
    CheckMxfp4Spec(spec->value("weight", Json()), name + ".weight", /*dynamic=*/false, &problems);
    const Json input = spec->value("input_tensors", Json());
    if (!input.is_null()) {
      CheckMxfp4Spec(input, name + ".input_tensors", /*dynamic=*/true, &problems);
      fp4_activations = true;
    }
    if (!spec->value("output_tensors", Json()).is_null()) problems.push_back(name + ".output_tensors must be null");
  }
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    Fail(qwhere, ": quant_method quark is supported for OCP MXFP4 only: ", all);
  }
  if (const auto exclude = q_json.find("exclude"); exclude != q_json.end() && !exclude->is_null()) {
    if (!exclude->is_array()) Fail(qwhere, ": 'exclude' must be a list of module names");
    for (const Json& name : *exclude) {
      if (!name.is_string()) Fail(qwhere, ": 'exclude' entries must be strings");
      q.exclude.push_back(name.get<std::string>());
    }
  }
  q.block_rows = 1;
  q.block_cols = 32;
  q.activations = fp4_activations ? "fp4" : "none";
}

QuantizationConfig ParseQuantization(const Json& json, const std::string& where) {
  QuantizationConfig q;
  q.expert_dtype = GetString(json, "expert_dtype", where, "");
  auto it = json.find("quantization_config");
  if (it == json.end() || it->is_null()) return q;
  const std::string qwhere = where + ": quantization_config";
  if (q.expert_dtype.empty()) q.expert_dtype = GetString(*it, "expert_dtype", qwhere, "");
  q.method = GetString(*it, "quant_method", qwhere);
  if (q.method == "quark") {
    ParseQuark(*it, qwhere, q);
    return q;
  }
  if (q.method != "fp8")
    Fail(qwhere, ": quant_method '", q.method,
         "' is not supported (supported: fp8 with 128x128 block scales, quark with OCP MXFP4)");
  q.activation_scheme = GetString(*it, "activation_scheme", qwhere, "dynamic");
  const std::string fmt = GetString(*it, "fmt", qwhere, "e4m3");
  if (fmt != "e4m3") Fail(qwhere, ": fmt '", fmt, "' is not supported (supported: e4m3)");
  auto block = it->find("weight_block_size");
  if (block == it->end() || !block->is_array() || block->size() != 2 || !(*block)[0].is_number_integer() ||
      !(*block)[1].is_number_integer())
    Fail(qwhere, ": 'weight_block_size' must be two integers (per-tensor FP8 is not supported)");
  q.block_rows = (*block)[0].get<std::int64_t>();
  q.block_cols = (*block)[1].get<std::int64_t>();
  if (q.block_rows != 128 || q.block_cols != 128)
    Fail(qwhere, ": weight_block_size [", q.block_rows, ", ", q.block_cols, "] is not supported (supported: [128, 128])");
  return q;
}

std::vector<std::int64_t> ParseEos(const Json& json, const std::string& where) {
  auto it = json.find("eos_token_id");
  if (it == json.end() || it->is_null()) return {};
  if (it->is_number_integer()) return {it->get<std::int64_t>()};
  if (it->is_array()) {
    std::vector<std::int64_t> ids;
    for (const Json& v : *it) {
      if (!v.is_number_integer()) Fail(where, ": 'eos_token_id' entries must be integers");
      ids.push_back(v.get<std::int64_t>());
    }
    return ids;
  }
  Fail(where, ": 'eos_token_id' must be an integer or a list of integers");
}

void ParseMla(const Json& json, const std::string& where, ModelConfig& c) {
  c.q_lora_rank = GetOptionalInt(json, "q_lora_rank", where).value_or(0);
  c.kv_lora_rank = GetInt(json, "kv_lora_rank", where);
  c.qk_nope_head_dim = GetInt(json, "qk_nope_head_dim", where);
  c.qk_rope_head_dim = GetInt(json, "qk_rope_head_dim", where);
  c.v_head_dim = GetInt(json, "v_head_dim", where);
  c.rope_interleave = GetBool(json, "rope_interleave", where, true);
  RequirePositive(c.kv_lora_rank, "kv_lora_rank", where);
  RequirePositive(c.qk_nope_head_dim, "qk_nope_head_dim", where);
  RequirePositive(c.qk_rope_head_dim, "qk_rope_head_dim", where);
  RequirePositive(c.v_head_dim, "v_head_dim", where);
  if (c.q_lora_rank < 0) Fail(where, ": field 'q_lora_rank' must be positive or null");
  if (c.qk_rope_head_dim % 2 != 0) Fail(where, ": field 'qk_rope_head_dim' must be even");
}

void ParseMoe(const Json& json, const std::string& where, ModelConfig& c) {
  c.n_routed_experts = GetOptionalInt(json, "n_routed_experts", where).value_or(0);
  c.num_nextn_predict_layers = GetOptionalInt(json, "num_nextn_predict_layers", where).value_or(0);
  if (c.num_nextn_predict_layers < 0) Fail(where, ": 'num_nextn_predict_layers' must be >= 0, got ", c.num_nextn_predict_layers);
  if (c.n_routed_experts == 0) return;
  c.n_shared_experts = GetOptionalInt(json, "n_shared_experts", where).value_or(0);
  c.num_experts_per_tok = GetInt(json, "num_experts_per_tok", where);
  c.moe_intermediate_size = GetInt(json, "moe_intermediate_size", where);
  c.n_group = GetOptionalInt(json, "n_group", where).value_or(1);
  c.topk_group = GetOptionalInt(json, "topk_group", where).value_or(1);
  c.first_k_dense_replace = GetInt(json, "first_k_dense_replace", where, 0);
  c.moe_layer_freq = GetInt(json, "moe_layer_freq", where, 1);
  c.routed_scaling_factor = GetDouble(json, "routed_scaling_factor", where, 1.0);
  c.norm_topk_prob = GetBool(json, "norm_topk_prob", where, true);
  c.scoring_func = GetString(json, "scoring_func", where, c.model_type == "deepseek_v4" ? "sqrtsoftplus" : "sigmoid");
  c.topk_method = GetString(json, "topk_method", where, "noaux_tc");
  // DeepSeek-V4's mlp_layer_types say which MoE layers are hash-routed (V4Config).
  if (c.model_type != "deepseek_v4")
    if (auto types = GetLayerList(json, "mlp_layer_types", where, c.num_hidden_layers, {"dense", "sparse"}))
      for (const std::string& t : *types) c.moe_layers.push_back(t == "sparse");
  RequirePositive(c.num_experts_per_tok, "num_experts_per_tok", where);
  RequirePositive(c.moe_intermediate_size, "moe_intermediate_size", where);
  RequirePositive(c.n_group, "n_group", where);
  RequirePositive(c.moe_layer_freq, "moe_layer_freq", where);
  if (c.n_routed_experts < 0) Fail(where, ": field 'n_routed_experts' must not be negative");
  if (c.n_routed_experts % c.n_group != 0)
    Fail(where, ": n_routed_experts (", c.n_routed_experts, ") must be divisible by n_group (", c.n_group, ")");
  if (c.topk_group < 1 || c.topk_group > c.n_group)
    Fail(where, ": topk_group (", c.topk_group, ") must be in [1, n_group = ", c.n_group, "]");
  if (c.n_group > 1 && c.n_routed_experts / c.n_group < 2)
    Fail(where, ": group-limited routing needs at least 2 experts per group");
  if (c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
    Fail(where, ": num_experts_per_tok (", c.num_experts_per_tok, ") exceeds the experts in topk_group groups");
}

// IndexShare's full/shared layers, by transformers' precedence: indexer_types, then
// index_topk_pattern, then index_topk_freq with index_skip_topk_offset.
std::vector<bool> ParseIndexShare(const Json& json, const std::string& where, std::int64_t layers) {
  std::vector<bool> full(static_cast<std::size_t>(layers), true);
  if (auto types = GetLayerList(json, "indexer_types", where, layers, {"full", "shared"})) {
    for (std::size_t i = 0; i < full.size(); ++i) full[i] = (*types)[i] == "full";
  } else if (auto it = json.find("index_topk_pattern"); it != json.end() && !it->is_null()) {
    if (!it->is_string() || static_cast<std::int64_t>(it->get<std::string>().size()) != layers)
      Fail(where, ": field 'index_topk_pattern' must be a string of num_hidden_layers (", layers,
           ") letters F (full) and S (shared)");
    const std::string pattern = it->get<std::string>();
    for (std::size_t i = 0; i < full.size(); ++i) {
      if (pattern[i] != 'F' && pattern[i] != 'S')
        Fail(where, ": index_topk_pattern[", i, "] is '", pattern[i], "' (expected F or S)");
      full[i] = pattern[i] == 'F';
    }
  } else if (json.contains("index_topk_freq")) {
    const std::int64_t freq = std::max<std::int64_t>(GetInt(json, "index_topk_freq", where), 1);
    const std::int64_t offset = GetInt(json, "index_skip_topk_offset", where, 2);
    for (std::int64_t i = 0; i < layers; ++i)
      full[static_cast<std::size_t>(i)] = std::max<std::int64_t>(i - offset + 1, 0) % freq == 0;
  }
  if (!full.empty() && !full[0])
    Fail(where, ": layer 0 is a shared indexer layer, but a shared layer reuses the top-k of an earlier full one");
  return full;
}

void ParseIndexer(const Json& json, const std::string& where, ModelConfig& c) {
  IndexerConfig idx;
  idx.n_heads = GetInt(json, "index_n_heads", where);
  idx.head_dim = GetInt(json, "index_head_dim", where);
  idx.topk = GetInt(json, "index_topk", where);
  RequirePositive(idx.n_heads, "index_n_heads", where);
  RequirePositive(idx.head_dim, "index_head_dim", where);
  RequirePositive(idx.topk, "index_topk", where);
  idx.rope_interleave = GetBool(json, "indexer_rope_interleave", where, c.model_type == "glm_moe_dsa");
  idx.full_layers = ParseIndexShare(json, where, c.num_hidden_layers);
  c.indexer = idx;
}

// DSA models derive the indexer's query from MLA's query latent and rotate its first dims.
void CheckIndexerFitsMla(const ModelConfig& c) {
  if (c.q_lora_rank <= 0)
    Fail(c.source, ": DeepSeek Sparse Attention needs a query LoRA (q_lora_rank), whose latent the indexer reads");
  if (c.indexer->head_dim < c.qk_rope_head_dim)
    Fail(c.source, ": index_head_dim (", c.indexer->head_dim, ") is smaller than qk_rope_head_dim (",
         c.qk_rope_head_dim, "), the part of it that rope rotates");
}

}  // namespace

const std::vector<std::string>& KnownModelTypes() {
  static const std::vector<std::string> kTypes = {"deepseek_v3", "kimi_k2", "deepseek_v32", "glm_moe_dsa",
                                                  "deepseek_v4"};
  return kTypes;
}

ModelConfig ParseModelConfig(const Json& json, const std::string& source) {
  if (!json.is_object()) Fail(source, ": expected a JSON object");
  ModelConfig c;
  c.source = source;
  c.model_type = GetString(json, "model_type", source);
  const auto& known = KnownModelTypes();
  if (std::find(known.begin(), known.end(), c.model_type) == known.end()) {
    std::string list;
    for (const auto& t : known) list += (list.empty() ? "" : ", ") + t;
    Fail(source, ": unknown model_type '", c.model_type, "' (known: ", list, ")");
  }
  if (auto it = json.find("architectures"); it != json.end() && it->is_array())
    for (const Json& a : *it)
      if (a.is_string()) c.architectures.push_back(a.get<std::string>());

  c.vocab_size = GetInt(json, "vocab_size", source);
  c.hidden_size = GetInt(json, "hidden_size", source);
  c.num_hidden_layers = GetInt(json, "num_hidden_layers", source);
  c.num_attention_heads = GetInt(json, "num_attention_heads", source);
  c.num_key_value_heads = GetInt(json, "num_key_value_heads", source, c.num_attention_heads);
  c.max_position_embeddings = GetInt(json, "max_position_embeddings", source, 4096);
  c.rms_norm_eps = GetDouble(json, "rms_norm_eps", source, 1e-6);
  c.hidden_act = GetString(json, "hidden_act", source, "silu");
  c.tie_word_embeddings = GetBool(json, "tie_word_embeddings", source, false);
  c.bos_token_id = GetOptionalInt(json, "bos_token_id", source);
  c.eos_token_ids = ParseEos(json, source);
  for (auto [value, name] : {std::pair{c.vocab_size, "vocab_size"}, {c.hidden_size, "hidden_size"},
                             {c.num_hidden_layers, "num_hidden_layers"},
                             {c.num_attention_heads, "num_attention_heads"},
                             {c.max_position_embeddings, "max_position_embeddings"}})
    RequirePositive(value, name, source);
  if (c.hidden_act != "silu") Fail(source, ": hidden_act '", c.hidden_act, "' is not supported (supported: silu)");
  if (c.rms_norm_eps <= 0) Fail(source, ": field 'rms_norm_eps' must be positive");

  if (c.model_type == "deepseek_v4") {
    ParseV4(json, source, c);
    ParseIndexer(json, source, c);
    CheckV4Fits(c, source);
    c.rope = c.v4->compress_rope;
  } else {
    c.intermediate_size = GetInt(json, "intermediate_size", source);
    RequirePositive(c.intermediate_size, "intermediate_size", source);
    ParseMla(json, source, c);
    if (c.model_type == "deepseek_v32" || c.model_type == "glm_moe_dsa") {
      ParseIndexer(json, source, c);
      CheckIndexerFitsMla(c);
    }
  }
  if (!c.v4) c.rope = ParseRope(json, source);
  ParseMoe(json, source, c);
  const std::string scoring = c.model_type == "deepseek_v4" ? "sqrtsoftplus" : "sigmoid";
  if (c.scoring_func != scoring)
    Fail(source, ": scoring_func '", c.scoring_func, "' is not supported for ", c.model_type, " (supported: ", scoring, ")");
  if (c.model_type == "deepseek_v4" && (c.n_routed_experts == 0 || c.n_group != 1))
    Fail(source, ": DeepSeek-V4 routes every layer over one group of routed experts (n_routed_experts ",
         c.n_routed_experts, ", n_group ", c.n_group, ")");
  c.quantization = ParseQuantization(json, source);
  return c;
}

ModelConfig LoadModelConfig(const std::string& dir, const std::string& override_json) {
  const std::string path = dir + "/config.json";
  Json json = ReadJsonFile(path);
  std::string source = path;
  if (!override_json.empty()) {
    const Json patch = ParseJson(override_json, "--json-model-override-args");
    if (!patch.is_object()) Fail("--json-model-override-args: expected a JSON object");
    json.merge_patch(patch);
    source += " (with --json-model-override-args)";
  }
  return ParseModelConfig(json, source);
}

}  // namespace fission::io
