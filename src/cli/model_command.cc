// `fission model inspect DIR`: architecture, parameter count by dtype and the tensor list.
#include <cstdio>
#include <functional>
#include <map>

#include "base/error.h"
#include "cli/commands.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/arch/deepseek_v4.h"

namespace fission::cli {
namespace {

// "0-2, 5, 7-9": the layers where `pick` holds.
std::string LayerList(std::int64_t layers, const std::function<bool(std::int64_t)>& pick) {
  std::string out;
  for (std::int64_t i = 0; i < layers; ++i) {
    if (!pick(i)) continue;
    std::int64_t j = i;
    while (j + 1 < layers && pick(j + 1)) ++j;
    out += StrCat(out.empty() ? "" : ", ", i, j > i ? StrCat("-", j) : std::string());
    i = j;
  }
  return out.empty() ? "none" : out;
}

// MLA's dims and, for the DSA families, the indexer.
void PrintMla(const io::ModelConfig& c) {
  std::printf("attention         MLA: %lld heads, q_lora %lld, kv_lora %lld, nope %lld, rope %lld, v %lld\n",
              static_cast<long long>(c.num_attention_heads), static_cast<long long>(c.q_lora_rank),
              static_cast<long long>(c.kv_lora_rank), static_cast<long long>(c.qk_nope_head_dim),
              static_cast<long long>(c.qk_rope_head_dim), static_cast<long long>(c.v_head_dim));
  std::printf("kv row            %lld values per token per layer\n",
              static_cast<long long>(c.kv_lora_rank + c.qk_rope_head_dim));
  if (!c.indexer) return;
  const io::IndexerConfig& idx = *c.indexer;
  const auto full = [&](std::int64_t i) { return idx.full_layers[static_cast<std::size_t>(i)]; };
  std::printf("sparse attention  DSA indexer: %lld heads of %lld, top-k %lld, %s rope; one index key of %lld "
              "values per token per full layer\n",
              static_cast<long long>(idx.n_heads), static_cast<long long>(idx.head_dim),
              static_cast<long long>(idx.topk), idx.rope_interleave ? "interleaved" : "half-split",
              static_cast<long long>(idx.head_dim));
  std::printf("index share       full layers %s; shared layers %s\n", LayerList(c.num_hidden_layers, full).c_str(),
              LayerList(c.num_hidden_layers, [&](std::int64_t i) { return !full(i); }).c_str());
}

// DeepSeek-V4's attention kinds, mHC and the memory it declares (bytes per token of the paged
// classes and per request of the others, with bf16 and with fp8 keys and entries).
void PrintV4(const io::ModelConfig& c) {
  const io::V4Config& v4 = *c.v4;
  auto layers = [&](const std::function<bool(std::size_t)>& pick) {
    return LayerList(c.num_hidden_layers, [&](std::int64_t i) { return pick(static_cast<std::size_t>(i)); });
  };
  auto kind = [&](io::V4Attention k) { return layers([&](std::size_t i) { return v4.attention[i] == k; }); };
  std::printf("attention         V4: %lld heads of %lld (rope %lld), one shared KV head, window %lld, q_lora %lld, "
              "%lld output groups of rank %lld\n",
              static_cast<long long>(c.num_attention_heads), static_cast<long long>(v4.head_dim),
              static_cast<long long>(c.qk_rope_head_dim), static_cast<long long>(v4.sliding_window),
              static_cast<long long>(c.q_lora_rank), static_cast<long long>(v4.o_groups),
              static_cast<long long>(v4.o_lora_rank));
  std::printf("layer kinds       sliding %s; CSA %s; HCA %s\n", kind(io::V4Attention::kSliding).c_str(),
              kind(io::V4Attention::kCsa).c_str(), kind(io::V4Attention::kHca).c_str());
  std::printf("hash routing      layers %s; hyper-connections %lld streams\n",
              layers([&](std::size_t i) { return v4.hash_routed[i]; }).c_str(), static_cast<long long>(v4.hc_mult));
  for (auto [format, name] : {std::pair{kernels::V4KvFormat::kExact, "bf16"}, {kernels::V4KvFormat::kFp8, "fp8_e4m3"}}) {
    // The CSA indexer's keys in e4m3, their default beside a bf16 or an fp8 cache.
    const model::MemorySpec spec = model::V4MemorySpec(c, format, kernels::IndexKeyFormat::kFp8, DType::kBF16);
    std::printf("memory %-10s %.1f bytes per token (pages of 256) and %lld bytes per request\n", name,
                spec.bytes_per_token(256), static_cast<long long>(spec.state_slot_bytes()));
    for (const model::CacheClass& cls : spec.classes) {
      const double bytes = static_cast<double>(cls.entry_bytes()) * cls.layers;
      if (cls.kind == model::CacheKind::kPaged) {
        std::printf("  %-22s %3d layers, %.1f bytes per token\n", cls.name.c_str(), cls.layers, bytes / cls.tokens_per_entry);
      } else {
        std::printf("  %-22s %3d layers, %.0f bytes per request\n", cls.name.c_str(), cls.layers,
                    bytes * cls.entries_per_request);
      }
    }
  }
}

void PrintArchitecture(const io::ModelConfig& c) {
  std::printf("model_type        %s\n", c.model_type.c_str());
  std::printf("architectures     %s\n", c.architectures.empty() ? "-" : c.architectures[0].c_str());
  std::printf("layers            %lld; MoE in layers %s\n", static_cast<long long>(c.num_hidden_layers),
              LayerList(c.num_hidden_layers, [&](std::int64_t i) { return c.IsMoeLayer(i); }).c_str());
  std::printf("hidden / vocab    %lld / %lld\n", static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.vocab_size));
  if (c.v4) {
    PrintV4(c);
  } else {
    PrintMla(c);
  }
  if (c.n_routed_experts)
    std::printf("moe               %lld routed (top %lld, %lld groups, top %lld groups) + %lld shared, inter %lld\n",
                static_cast<long long>(c.n_routed_experts), static_cast<long long>(c.num_experts_per_tok),
                static_cast<long long>(c.n_group), static_cast<long long>(c.topk_group),
                static_cast<long long>(c.n_shared_experts), static_cast<long long>(c.moe_intermediate_size));
  std::printf("rope              %s theta %g factor %g\n", c.rope.type.c_str(), c.rope.theta, c.rope.factor);
  std::printf("quantization      %s\n", c.quantization.method.empty() ? "none" : c.quantization.method.c_str());
}

int Inspect(const std::string& dir) {
  const io::ModelConfig c = io::LoadModelConfig(dir);
  PrintArchitecture(c);
  if (!io::Checkpoint::Exists(dir)) {
    std::printf("parameters        none: config.json only (serve it with --load-format dummy)\n");
    return 0;
  }
  io::Checkpoint ckpt(dir);
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
