// `fission model inspect DIR`: architecture, parameter count by dtype and the tensor list.
#include <cstdio>
#include <map>

#include "base/error.h"
#include "cli/commands.h"
#include "io/checkpoint.h"
#include "io/model_config.h"

namespace fission::cli {
namespace {

int Inspect(const std::string& dir) {
  const io::ModelConfig c = io::LoadModelConfig(dir);
  io::Checkpoint ckpt(dir);
  std::printf("model_type        %s\n", c.model_type.c_str());
  std::printf("architectures     %s\n", c.architectures.empty() ? "-" : c.architectures[0].c_str());
  std::printf("layers            %lld (%lld dense, then MoE)\n", static_cast<long long>(c.num_hidden_layers),
              static_cast<long long>(c.n_routed_experts ? c.first_k_dense_replace : c.num_hidden_layers));
  std::printf("hidden / vocab    %lld / %lld\n", static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.vocab_size));
  std::printf("attention         MLA: %lld heads, q_lora %lld, kv_lora %lld, nope %lld, rope %lld, v %lld\n",
              static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.q_lora_rank),
              static_cast<long long>(c.kv_lora_rank), static_cast<long long>(c.qk_nope_head_dim),
              static_cast<long long>(c.qk_rope_head_dim), static_cast<long long>(c.v_head_dim));
  std::printf("kv row            %lld values per token per layer\n",
              static_cast<long long>(c.kv_lora_rank + c.qk_rope_head_dim));
  if (c.n_routed_experts)
    std::printf("moe               %lld routed (top %lld, %lld groups, top %lld groups) + %lld shared, inter %lld\n",
                static_cast<long long>(c.n_routed_experts), static_cast<long long>(c.num_experts_per_tok),
                static_cast<long long>(c.n_group), static_cast<long long>(c.topk_group),
                static_cast<long long>(c.n_shared_experts), static_cast<long long>(c.moe_intermediate_size));
  std::printf("rope              %s theta %g factor %g\n", c.rope.type.c_str(), c.rope.theta, c.rope.factor);
  std::printf("quantization      %s\n", c.quantization.method.empty() ? "none" : c.quantization.method.c_str());
  std::map<std::string, long long> by_dtype;
  long long total = 0;
  for (const std::string& name : ckpt.Names()) {
    const io::TensorInfo& info = ckpt.Info(name);
    by_dtype[std::string(DTypeName(info.dtype))] += info.shape.numel();
    total += info.shape.numel();
  }
  std::printf("parameters        %lld", total);
  for (const auto& [dtype, count] : by_dtype) std::printf("  %s:%lld", dtype.c_str(), count);
  std::printf("\n\ntensors (%zu):\n", ckpt.Names().size());
  for (const std::string& name : ckpt.Names()) {
    const io::TensorInfo& info = ckpt.Info(name);
    std::printf("  %-60s %-8s %s\n", name.c_str(), std::string(DTypeName(info.dtype)).c_str(),
                info.shape.ToString().c_str());
  }
  return 0;
}

}  // namespace

int RunModel(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::printf("usage: fission model inspect DIR\n");
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "inspect") {
    if (args.size() != 2) Fail("usage: fission model inspect DIR");
    return Inspect(args[1]);
  }
  Fail("unknown subcommand 'model ", args[0], "' (expected: inspect)");
}

FISSION_COMMAND("model", "inspect a checkpoint", RunModel);

}  // namespace fission::cli
