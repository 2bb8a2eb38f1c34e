// Online quantization: weights read in bf16/fp32 (or dequantized from the checkpoint's format) and
// quantized in the loader, module by module, into a block format (tensor/quantize.h), as ATOM's
// `online_quant_config` does. It comes from `--model-loader-extra-config
// '{"online_quant_config": {...}}'` or from `--quantization fp8` on an unquantized checkpoint.
//
// The config (ATOM's schema and resolution order):
//   global_quant_config  a format for every quantizable module ("" or absent: none);
//   layer_quant_config   {pattern: format}, in order: fnmatch globs (* ? [seq] [!seq]) over module
//                        names; a pattern without '*' matches a module whose name it contains;
//   exclude_layer        a name or a list: exact, prefix ("lm_head" excludes "lm_head.x"), glob
//                        (also matching sub-modules), or "re:" + an ECMAScript regex searched in
//                        the name; an experts module is excluded too when an entry names one of
//                        its experts.
// A module takes: excluded -> source precision; else the first matching layer rule; else the
// global format. Formats (case-insensitive): ptpc_fp8, per_block_fp8 = per_block128_fp8, mxfp8,
// mxfp4. Every problem (malformed JSON, an unknown format or key, a pattern that matches no module,
// gate and up of one MLP resolving differently) is reported at once, before any weight is read.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/model_config.h"
#include "tensor/weight.h"

namespace fission::model {

// A module name patterns match: the checkpoint's module path (a tensor name without ".weight").
// Quantizable modules are the Linear layers the model loads as matrices of its own products:
// self_attn.{q_a_proj, q_b_proj | q_proj, kv_a_proj_with_mqa, o_proj}, self_attn.indexer.{wq_b,
// wk}, mlp.{gate_proj, up_proj, down_proj} of dense layers, mlp.shared_experts.{gate_proj,
// up_proj, down_proj}, and mlp.experts (all routed experts of a layer: one module, one format).
// The others exist for matching but keep their source precision: model.embed_tokens, lm_head,
// mlp.gate (the router), self_attn.kv_b_proj (read by the attention kernels themselves) and
// self_attn.indexer.weights_proj.
struct QuantModule {
  std::string name;
  bool quantizable = false;
};
std::vector<QuantModule> QuantModules(const io::ModelConfig& config);

struct OnlineQuantConfig {
  std::string global;                                          // a format name, or ""
  std::vector<std::pair<std::string, std::string>> layer_rules;  // pattern -> format, in order
  std::vector<std::string> exclude;
};
// The `online_quant_config` of a --model-loader-extra-config JSON object (nullopt without one).
// Other keys of the object belong to SGLang's Python loaders and are returned in `ignored`.
std::optional<OnlineQuantConfig> ParseLoaderExtraConfig(const std::string& json, std::vector<std::string>* ignored);
// The block format of an online format name; an Error listing the formats otherwise.
WeightFormat OnlineFormat(const std::string& name, const std::string& where);

// Pattern semantics, as above.
bool FnMatch(const std::string& name, const std::string& pattern);
bool ExcludeMatches(const std::string& module, const std::string& entry);
bool RuleMatches(const std::string& module, const std::string& pattern);

class OnlineQuantPlan {
 public:
  OnlineQuantPlan() = default;
  // Resolves every module of `modules`; all problems in one Error naming `where`.
  static OnlineQuantPlan Resolve(const OnlineQuantConfig& config, const std::vector<QuantModule>& modules,
                                 const std::string& where);
  bool empty() const { return formats_.empty(); }
  // The format a module is quantized into, or nullopt (source precision).
  std::optional<WeightFormat> FormatOf(const std::string& module) const;
  const std::map<std::string, WeightFormat>& formats() const { return formats_; }
  // One line per format naming its modules, then the modules kept at source precision.
  std::string Summary() const;

 private:
  std::map<std::string, WeightFormat> formats_;
  std::vector<std::string> unquantized_;
};

// The module a weight tensor belongs to for matching: "<...>.mlp.experts.<e>.<proj>.weight" is
// "<...>.mlp.experts"; any other "<module>.weight" is "<module>".
std::string ModuleOfTensor(const std::string& tensor);

}  // namespace fission::model
