#include "model/registry.h"

#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/deepseek_v3.h"
#include "model/load_flags.h"
#include "model/parallel_model.h"

namespace fission::model {
namespace {

MlaForm ParseMlaForm(const std::string& form) {
  if (form == "auto") return MlaForm::kAuto;
  if (form == "expanded") return MlaForm::kExpanded;
  if (form == "absorbed") return MlaForm::kAbsorbed;
  Fail("unknown MLA form '", form, "' (expected auto, expanded or absorbed)");
}

// The CPU backend lives as long as the process: models hold a reference to it.
kernels::Backend& CpuBackendInstance() {
  static std::unique_ptr<kernels::Backend> backend = kernels::MakeCpuBackend();
  return *backend;
}

}  // namespace

std::unique_ptr<CausalLM> LoadCausalLM(const std::string& dir, const LoadOptions& options) {
  io::ModelConfig config = io::LoadModelConfig(dir, options.json_model_override_args);
  if (config.model_type == "deepseek_v32" || config.model_type == "glm_moe_dsa")
    Fail(config.source, ": model_type '", config.model_type,
         "' (DeepSeek Sparse Attention) is not supported yet; its config was read (indexer: ",
         config.indexer->n_heads, " heads of ", config.indexer->head_dim, ", top-k ", config.indexer->topk, ")");
  if (config.model_type == "deepseek_v4")
    Fail(config.source, ": model_type 'deepseek_v4' is not supported yet; its config was read (sliding window ",
         config.v4->sliding_window, ", ", config.v4->layer_types.size(), " layer types)");
  ValidateLoadOptions(options);
  ShardOptions shard;
  shard.mla_form = ParseMlaForm(options.mla_form);
  shard.pcp_min_tokens = options.pcp_min_tokens;
  kernels::Backend& backend = CpuBackendInstance();
  std::unique_ptr<io::Checkpoint> checkpoint;
  if (options.load_format != "dummy") checkpoint = std::make_unique<io::Checkpoint>(dir);
  auto load_rank = [&](const comm::ProcessGroups* groups) {
    ShardOptions rank_options = shard;
    rank_options.rank.groups = groups;
    WeightLoader loader(checkpoint.get(), backend, options.dummy_seed);
    return std::make_unique<DeepseekV3Model>(config, loader, rank_options);
  };
  if (options.tp_size == 1) return load_rank(nullptr);
  auto world = std::make_unique<comm::LocalWorld>(options.tp_size, options.attn_cp_size);
  std::vector<std::unique_ptr<CausalLM>> ranks;
  for (int r = 0; r < options.tp_size; ++r) ranks.push_back(load_rank(&world->Groups(r)));
  return std::make_unique<ParallelCausalLM>(std::move(world), std::move(ranks));
}

}  // namespace fission::model
