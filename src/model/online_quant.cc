#include "model/online_quant.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <regex>

#include "base/error.h"
#include "base/json.h"

namespace fission::model {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(s.begin());
  return s;
}

// Python's fnmatch: '*' any run (dots included), '?' one character, '[seq]' / '[!seq]' a set.
bool Match(const char* n, const char* p) {
  for (; *p != '\0'; ++p, ++n) {
    if (*p == '*') {
      for (const char* rest = n;; ++rest) {
        if (Match(rest, p + 1)) return true;
        if (*rest == '\0') return false;
      }
    }
    if (*n == '\0') return false;
    if (*p == '[') {
      const char* q = p + 1;
      const bool negate = *q == '!';
      if (negate) ++q;
      const char* close = std::strchr(q + (*q == ']' ? 1 : 0), ']');
      if (close == nullptr) {  // no closing bracket: a literal '['
        if (*n != '[') return false;
        continue;
      }
      bool in = false;
      for (const char* c = q; c < close; ++c) {
        if (c + 2 < close && c[1] == '-') {
          in = in || (*n >= c[0] && *n <= c[2]);
          c += 2;
        } else {
          in = in || *n == *c;
        }
      }
      if (in == negate) return false;
      p = close;
      continue;
    }
    if (*p != '?' && *p != *n) return false;
  }
  return *n == '\0';
}

bool IsGlob(const std::string& s) { return s.find_first_of("*?") != std::string::npos; }

void AddModules(std::vector<QuantModule>& out, const std::string& prefix, std::initializer_list<const char*> names,
                bool quantizable) {
  for (const char* n : names) out.push_back({prefix + n, quantizable});
}

std::string FormatLabel(const WeightFormat& f) {
  if (f == WeightFormat::Fp8PerChannel()) return "ptpc_fp8";
  if (f == WeightFormat::Fp8Block128()) return "per_block128_fp8";
  if (f == WeightFormat::Mxfp8()) return "mxfp8";
  return "mxfp4";
}

}  // namespace

bool FnMatch(const std::string& name, const std::string& pattern) { return Match(name.c_str(), pattern.c_str()); }

bool ExcludeMatches(const std::string& module, const std::string& entry) {
  if (entry.rfind("re:", 0) == 0) return std::regex_search(module, std::regex(entry.substr(3)));
  if (IsGlob(entry)) return FnMatch(module, entry) || FnMatch(module, entry + ".*");
  if (module == entry || module.rfind(entry + ".", 0) == 0) return true;
  // An experts module is excluded with any of its experts (Quark lists them one by one).
  return module.ends_with(".experts") && entry.rfind(module + ".", 0) == 0;
}

bool RuleMatches(const std::string& module, const std::string& pattern) {
  if (pattern.find('*') == std::string::npos) return pattern.find(module) != std::string::npos;
  return FnMatch(module, pattern);
}

WeightFormat OnlineFormat(const std::string& name, const std::string& where) {
  const std::string f = Lower(name);
  if (f == "ptpc_fp8") return WeightFormat::Fp8PerChannel();
  if (f == "per_block_fp8" || f == "per_block128_fp8") return WeightFormat::Fp8Block128();
  if (f == "mxfp8") return WeightFormat::Mxfp8();
  if (f == "mxfp4") return WeightFormat::Mxfp4();
  Fail(where, ": unknown online quantization format '", name,
       "' (expected one of: mxfp4, mxfp8, per_block128_fp8, per_block_fp8, ptpc_fp8)");
}

std::string ModuleOfTensor(const std::string& tensor) {
  std::string module = tensor.ends_with(".weight") ? tensor.substr(0, tensor.size() - 7) : tensor;
  const std::size_t experts = module.find(".experts.");
  if (experts != std::string::npos && experts + 9 < module.size() && std::isdigit(static_cast<unsigned char>(module[experts + 9])))
    return module.substr(0, experts + 8);
  return module;
}

std::vector<QuantModule> QuantModules(const io::ModelConfig& c) {
  std::vector<QuantModule> out = {{"model.embed_tokens", false}, {"lm_head", false}};
  for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string layer = StrCat("model.layers.", i, ".");
    if (c.q_lora_rank > 0) {
      AddModules(out, layer + "self_attn.", {"q_a_proj", "q_b_proj"}, true);
    } else {
      AddModules(out, layer + "self_attn.", {"q_proj"}, true);
    }
    AddModules(out, layer + "self_attn.", {"kv_a_proj_with_mqa", "o_proj"}, true);
    AddModules(out, layer + "self_attn.", {"kv_b_proj"}, false);
    if (c.indexer && c.indexer->full_layers[static_cast<std::size_t>(i)]) {
      AddModules(out, layer + "self_attn.indexer.", {"wq_b", "wk"}, true);
      AddModules(out, layer + "self_attn.indexer.", {"weights_proj"}, false);
    }
    if (!c.IsMoeLayer(i)) {
      AddModules(out, layer + "mlp.", {"gate_proj", "up_proj", "down_proj"}, true);
      continue;
    }
    AddModules(out, layer + "mlp.", {"gate"}, false);
    AddModules(out, layer + "mlp.", {"experts"}, true);
    if (c.n_shared_experts > 0) AddModules(out, layer + "mlp.shared_experts.", {"gate_proj", "up_proj", "down_proj"}, true);
  }
  return out;
}

std::optional<OnlineQuantConfig> ParseLoaderExtraConfig(const std::string& text, std::vector<std::string>* ignored) {
  const std::string where = "--model-loader-extra-config";
  if (text.empty()) return std::nullopt;
  const OrderedJson json = ParseOrderedJson(text, where);  // layer rules keep their order
  if (!json.is_object()) Fail(where, ": expected a JSON object, got ", json.dump());
  std::optional<OnlineQuantConfig> result;
  for (const auto& [key, value] : json.items()) {
    if (key != "online_quant_config") {
      ignored->push_back(key);
      continue;
    }
    const std::string qwhere = where + ": online_quant_config";
    if (!value.is_object()) Fail(qwhere, " must be an object");
    OnlineQuantConfig config;
    std::vector<std::string> problems;
    for (const auto& [field, v] : value.items()) {
      if (field == "global_quant_config") {
        if (v.is_string()) config.global = v.get<std::string>();
        else if (!v.is_null()) problems.push_back("global_quant_config must be a format name");
      } else if (field == "layer_quant_config") {
        if (!v.is_object()) {
          problems.push_back("layer_quant_config must be an object of pattern: format");
          continue;
        }
        for (const auto& [pattern, format] : v.items()) {
          if (!format.is_string()) problems.push_back(StrCat("layer_quant_config['", pattern, "'] must be a format name"));
          else config.layer_rules.emplace_back(pattern, format.get<std::string>());
        }
      } else if (field == "exclude_layer") {
        if (v.is_string() && !v.get<std::string>().empty()) {
          config.exclude.push_back(v.get<std::string>());
        } else if (v.is_array()) {
          for (const auto& e : v) {
            if (e.is_string()) config.exclude.push_back(e.get<std::string>());
            else problems.push_back(StrCat("exclude_layer entry ", e.dump(), " must be a string"));
          }
        } else if (!v.is_string() && !v.is_null()) {
          problems.push_back("exclude_layer must be a name or a list of names");
        }
      } else {
        problems.push_back(StrCat("unknown key '", field, "' (expected global_quant_config, layer_quant_config, exclude_layer)"));
      }
    }
    if (!problems.empty()) {
      std::string all;
      for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
      Fail(qwhere, ": ", all);
    }
    result = std::move(config);
  }
  return result;
}

OnlineQuantPlan OnlineQuantPlan::Resolve(const OnlineQuantConfig& config, const std::vector<QuantModule>& modules,
                                         const std::string& where) {
  std::vector<std::string> problems;
  auto format_of = [&](const std::string& name, const std::string& what) -> std::optional<WeightFormat> {
    if (Lower(name).empty()) return std::nullopt;
    try {
      return OnlineFormat(name, what);
    } catch (const Error& e) {
      problems.push_back(e.what());
      return std::nullopt;
    }
  };
  const std::optional<WeightFormat> global = format_of(config.global, "global_quant_config");
  std::vector<std::optional<WeightFormat>> rule_formats;
  for (const auto& [pattern, name] : config.layer_rules)
    rule_formats.push_back(format_of(name, StrCat("layer_quant_config['", pattern, "']")));
  for (const std::string& entry : config.exclude) {
    if (entry.rfind("re:", 0) != 0) continue;
    try {
      std::regex check(entry.substr(3));
    } catch (const std::regex_error& e) {
      problems.push_back(StrCat("exclude_layer '", entry, "': not a regular expression (", e.what(), ")"));
    }
  }
  // Patterns that match no module are errors; so is a layer rule that matches only excluded ones.
  for (const std::string& entry : config.exclude) {
    if (entry.rfind("re:", 0) == 0 && std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
          return p.find("'" + entry + "'") != std::string::npos;
        }))
      continue;
    if (std::none_of(modules.begin(), modules.end(), [&](const QuantModule& m) { return ExcludeMatches(m.name, entry); }))
      problems.push_back(StrCat("exclude_layer '", entry, "' matches no module"));
  }
  for (const auto& [pattern, name] : config.layer_rules)
    if (std::none_of(modules.begin(), modules.end(), [&](const QuantModule& m) { return RuleMatches(m.name, pattern); }))
      problems.push_back(StrCat("layer_quant_config pattern '", pattern, "' matches no module"));
  OnlineQuantPlan plan;
  if (problems.empty()) {
    for (const QuantModule& m : modules) {
      std::optional<WeightFormat> f;
      const bool excluded = std::any_of(config.exclude.begin(), config.exclude.end(),
                                        [&](const std::string& e) { return ExcludeMatches(m.name, e); });
      if (!excluded) {
        f = global;
        for (std::size_t r = 0; r < config.layer_rules.size(); ++r)
          if (RuleMatches(m.name, config.layer_rules[r].first)) {
            f = rule_formats[r];
            break;
          }
      }
      if (f && m.quantizable) {
        plan.formats_[m.name] = *f;
      } else {
        plan.unquantized_.push_back(m.name);
      }
    }
    // Gate and up are one stacked matrix: they must agree.
    for (const QuantModule& m : modules) {
      if (!m.name.ends_with(".gate_proj")) continue;
      const std::string up = m.name.substr(0, m.name.size() - 9) + "up_proj";
      const auto a = plan.FormatOf(m.name), b = plan.FormatOf(up);
      if (a != b)
        problems.push_back(StrCat(m.name, " resolves to ", a ? FormatLabel(*a) : "source precision", " and ", up,
                                  " to ", b ? FormatLabel(*b) : "source precision",
                                  "; the two are one stacked matrix and need one format"));
    }
  }
  if (!problems.empty()) {
    std::string all;
    for (const std::string& p : problems) all += (all.empty() ? "" : "; ") + p;
    Fail(where, ": ", all);
  }
  return plan;
}

std::optional<WeightFormat> OnlineQuantPlan::FormatOf(const std::string& module) const {
  const auto it = formats_.find(module);
  if (it == formats_.end()) return std::nullopt;
  return it->second;
}

std::string OnlineQuantPlan::Summary() const {
  std::map<std::string, std::vector<std::string>> by_format;
  for (const auto& [module, format] : formats_) by_format[FormatLabel(format) + " (" + format.Name() + ")"].push_back(module);
  std::string out;
  auto line = [&](const std::string& label, const std::vector<std::string>& modules) {
    out += StrCat("\n  ", label, ", ", modules.size(), " modules:");
    for (const std::string& m : modules) out += " " + m;
  };
  for (const auto& [label, modules] : by_format) line(label, modules);
  line("source precision", unquantized_);
  return out;
}

}  // namespace fission::model
