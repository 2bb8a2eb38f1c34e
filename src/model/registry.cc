#include "model/registry.h"

#include <map>
#include <string>

#include "base/error.h"
#include "model/arch/deepseek_v3.h"
#include "model/arch/deepseek_v32.h"
#include "model/arch/deepseek_v4.h"

namespace fission::model {
namespace {

template <typename Family>
ModelFactory Make() {
  return [](const io::ModelConfig& config, WeightLoader& loader, const ShardOptions& options) {
    return std::make_unique<Family>(config, loader, options);
  };
}

const std::map<std::string, ModelFactory>& Families() {
  static const auto* families = new std::map<std::string, ModelFactory>{
      {"deepseek_v3", Make<DeepseekV3Model>()},
      {"kimi_k2", Make<DeepseekV3Model>()},
      {"deepseek_v32", Make<DeepseekSparseModel>()},
      {"glm_moe_dsa", Make<DeepseekSparseModel>()},
      {"deepseek_v4", Make<DeepseekV4Model>()},
  };
  return *families;
}

}  // namespace

bool HasDraftLayer(const io::ModelConfig& config) {
  // The DSA families' MTP layer is a DSA layer: it plugs in as their own DraftHead when it lands.
  return config.model_type == "deepseek_v3" || config.model_type == "kimi_k2";
}

const ModelFactory& FactoryFor(const io::ModelConfig& config) {
  const auto it = Families().find(config.model_type);
  if (it == Families().end()) Fail(config.source, ": model_type '", config.model_type, "' is not supported");
  return it->second;
}

}  // namespace fission::model
