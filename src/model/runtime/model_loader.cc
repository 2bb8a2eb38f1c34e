#include "model/runtime/model_loader.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/log.h"
#include "base/mapped_file.h"
#include "comm/tcp_world.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/online_quant.h"
#include "model/registry.h"
#include "model/runtime/draft_source.h"
#include "model/runtime/device_model.h"
#include "model/runtime/follower_step.h"
#include "model/runtime/load_flags.h"
#include "model/runtime/parallel_model.h"

#ifdef FISSION_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#endif
#ifdef FISSION_HAVE_NCCL
#include "comm/nccl/nccl_communicator.h"
#endif

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

int CudaDeviceCount() {
#ifdef FISSION_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
#else
  return 0;
#endif
}

// "auto" becomes cuda when this build and host have one, else cpu.
DeviceSpec ResolveDevice(const std::string& device) {
  DeviceSpec spec = ParseDevice(device);
  if (spec.automatic) {
    spec.automatic = false;
    spec.cuda = CudaDeviceCount() > 0;
  }
  return spec;
}

// How the indexer keys are stored next to a KV cache of `kv_dtype` and `latent` format
// (LoadOptions::index_keys).
kernels::IndexKeyFormat IndexKeyFormatFor(const std::string& choice, DType kv_dtype, kernels::LatentFormat latent) {
  if (choice == "fp8") return kernels::IndexKeyFormat::kFp8;
  if (choice == "exact") return kernels::IndexKeyFormat::kExact;
  return kv_dtype == DType::kBF16 || latent == kernels::LatentFormat::kFp8 ? kernels::IndexKeyFormat::kFp8
                                                                            : kernels::IndexKeyFormat::kExact;
}

// One rank's shard, built by its family (the one place a model is constructed).
std::unique_ptr<CausalLM> BuildShard(const io::ModelConfig& config, WeightLoader& loader, const ShardOptions& shard,
                                     const comm::ProcessGroups* groups) {
  ShardOptions rank_options = shard;
  rank_options.rank.groups = groups;
  return FactoryFor(config)(config, loader, rank_options);
}

// Whether a rank's routed experts fit the CUDA MX (MXFP4, MXFP8) kernel: every row of codes starts
// on a word of 8 codes, so both products' k (hidden_size and this rank's share of
// moe_intermediate_size) are multiples of 8.
bool MxExpertsFitCuda(const io::ModelConfig& config, const LoadOptions& options) {
  const int moe_tp = std::max(1, options.tp_size / std::max(1, options.ep_size));
  return config.hidden_size % 8 == 0 && config.moe_intermediate_size % moe_tp == 0 &&
         (config.moe_intermediate_size / moe_tp) % 8 == 0;
}

bool IsRoutedExperts(const std::string& module) {
  const std::string suffix = ".mlp.experts";
  return module.size() >= suffix.size() && module.compare(module.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The online quantization of --quantization and --model-loader-extra-config, resolved over the
// model's modules and logged, before any weight is read. Devices run Fp8Block128 and
// Fp8PerChannel everywhere, Mxfp4 and Mxfp8 on the routed experts.
OnlineQuantPlan PlanOnlineQuant(const io::ModelConfig& config, const LoadOptions& options, bool cuda) {
  std::vector<std::string> ignored;
  std::optional<OnlineQuantConfig> online = ParseLoaderExtraConfig(options.model_loader_extra_config, &ignored);
  for (const std::string& key : ignored)
    Log(LogLevel::kWarning, "--model-loader-extra-config: '", key, "' is an option of SGLang's Python loaders; ignored");
  std::string where = "--model-loader-extra-config online_quant_config";
  if (options.quantization == "fp8" && config.quantization.method.empty()) {
    if (online) Fail("--quantization fp8 and an online_quant_config both ask for online quantization; give one");
    online = OnlineQuantConfig{"per_block128_fp8", {}, {}};
    where = "--quantization fp8";
  } else if (!options.quantization.empty() && options.quantization != config.quantization.method) {
    Fail("--quantization ", options.quantization, ": ", config.source, " is quantized with ",
         config.quantization.method, "; --quantization fp8 applies to FP8 or unquantized checkpoints");
  }
  if (!online) return {};
  OnlineQuantPlan plan = OnlineQuantPlan::Resolve(*online, QuantModules(config), where);
  if (cuda)
    for (const auto& [module, format] : plan.formats()) {
      if (format == WeightFormat::Fp8Block128() || format == WeightFormat::Fp8PerChannel()) continue;
      if ((format == WeightFormat::Mxfp4() || format == WeightFormat::Mxfp8()) && IsRoutedExperts(module)) {
        if (MxExpertsFitCuda(config, options)) continue;
        Fail(where, ": ", module, " resolves to ", format.Name(), ", but the CUDA MX experts kernel needs hidden_size (",
             config.hidden_size, ") and each rank's moe_intermediate_size (", config.moe_intermediate_size, " over ",
             std::max(1, options.tp_size / std::max(1, options.ep_size)), ") to be multiples of 8");
      }
      Fail(where, ": ", module, " resolves to ", format.Name(), ", which the CUDA backend has no kernels for (on ",
           "cuda per_block_fp8 / per_block128_fp8 and ptpc_fp8 run on every module and mxfp4 and mxfp8 on the routed ",
           "experts, model.layers.*.mlp.experts; the other formats and modules run on --device cpu)");
    }
  Log(LogLevel::kInfo, where, ": online quantization of ", plan.formats().size(), " modules", plan.Summary());
  return plan;
}

// "loaded X GB in Y s": the weights' device memory over the wall time from the first rank's
// loading to the last one's copies having landed.
[[maybe_unused]] void LogLoaded(std::size_t bytes, int devices, std::chrono::steady_clock::time_point start,
                                bool dummy) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gb = static_cast<double>(bytes) / 1e9;
  char line[160];
  std::snprintf(line, sizeof(line), "%s %.2f GB of %sweights onto %d device%s in %.2f s (%.2f GB/s)",
                dummy ? "drew" : "loaded", gb, dummy ? "dummy " : "", devices, devices == 1 ? "" : "s", seconds,
                seconds > 0 ? gb / seconds : 0.0);
  Log(LogLevel::kInfo, line);
}

std::unique_ptr<CausalLM> LoadOnCpu(const io::ModelConfig& config, const io::Checkpoint* checkpoint,
                                    const ShardOptions& shard, const LoadOptions& options,
                                    std::unique_ptr<comm::NodeLink> link, const OnlineQuantPlan& plan) {
  kernels::Backend& backend = CpuBackendInstance();
  auto load_rank = [&](const comm::ProcessGroups* groups) {
    WeightLoader loader(checkpoint, backend, options.dummy_seed);
    loader.SetOnlineQuant(&plan);
    return BuildShard(config, loader, shard, groups);
  };
  if (options.tp_size == 1) return load_rank(nullptr);
  std::unique_ptr<comm::World> world;
  if (link) {
    world = std::make_unique<comm::TcpWorld>(options.tp_size, options.attn_cp_size, *link, options.nodes.timeout_s);
  } else {
    world = std::make_unique<comm::LocalWorld>(LayoutOf(options));
  }
  std::vector<std::unique_ptr<CausalLM>> ranks;
  for (int i = 0; i < world->num_local_ranks(); ++i)
    ranks.push_back(load_rank(&world->Groups(world->first_local_rank() + i)));
  return std::make_unique<ParallelCausalLM>(std::move(world), std::move(ranks), std::move(link));
}

// 64-bit FNV-1a: a fingerprint of the config the nodes load, compared in the handshake.
std::string Fingerprint(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char out[17];
  std::snprintf(out, sizeof(out), "%016llx", static_cast<unsigned long long>(h));
  return out;
}

std::string GraphSizesText(const CudaGraphOptions& options) {
  std::string text = "none";
  for (int s : CudaGraphSizes(options)) text = text == "none" ? std::to_string(s) : text + "," + std::to_string(s);
  return text;
}

// What every node must agree on before any of them loads weights.
comm::Handshake MakeHandshake(const std::string& dir, const LoadOptions& options, const DeviceSpec& device) {
  const std::string config_text = ReadFile(dir + "/config.json");
  return {
      {"the follower-step version", std::to_string(kFollowerStepVersion)},
      {"--nnodes", std::to_string(options.nodes.nnodes)},
      {"--tp-size", std::to_string(options.tp_size)},
      {"--attn-cp-size", std::to_string(options.attn_cp_size)},
      {"--nsa-prefill-cp-mode", options.cp_mode},
      {"--pcp-min-tokens", std::to_string(options.pcp_min_tokens)},
      {"--dsa-indexer-query-split", options.indexer_query_split ? "on" : "off"},
      // Graph replays pad batches, so every node must pad alike for the collectives to match.
      {"the CUDA graph batch sizes", GraphSizesText(options.cuda_graphs)},
      {"the model config (fingerprint of config.json and --json-model-override-args)",
       Fingerprint(config_text + '\0' + options.json_model_override_args)},
      {"--load-format", options.load_format},
      {"the dummy-weight seed", std::to_string(options.dummy_seed)},
      {"the MLA form", options.mla_form},
      {"--dtype", options.dtype},
      {"--kv-cache-dtype", options.kv_cache_dtype},
      {"--quantization", options.quantization},
      {"--model-loader-extra-config", options.model_loader_extra_config},
      {"the device kind", device.cuda ? "cuda" : "cpu"},
      {"--model-path", dir, /*compared=*/false},
  };
}

#ifdef FISSION_HAVE_CUDA
// DecideV4ExpertsOnCuda, logged once per load.
bool KeepsV4Fp4Experts(const io::ModelConfig& config, const LoadOptions& options) {
  if (config.model_type != "deepseek_v4") return false;
  const V4ExpertsOnCuda decision = DecideV4ExpertsOnCuda(config, options);
  if (decision.keep)
    Log(LogLevel::kInfo, config.source, ": DeepSeek-V4's FP4 routed experts stay FP4 on cuda (",
        WeightFormat::Mxfp4A8().Name(), ": decoded to e4m3 in registers, activations e4m3 per 1x128 as the "
        "reference's fp4_gemm takes them)");
  else if (!decision.why.empty())
    Log(decision.warn ? LogLevel::kWarning : LogLevel::kInfo, config.source,
        ": DeepSeek-V4's FP4 routed experts are dequantized at load: ", decision.why);
  return decision.keep;
}

// FP8 block-quantized weights stay FP8 on a device unless --dtype float32 asks for the exact
// (dequantized) weights. LinearFp8 takes 128×128 blocks only.
bool KeepsFp8(const io::ModelConfig& config, const LoadOptions& options) {
  const io::QuantizationConfig& q = config.quantization;
  if (q.method != "fp8" || options.dtype == "float32") return false;
  if (q.block_rows == 128 && q.block_cols == 128) return true;
  Log(LogLevel::kWarning, config.source, ": FP8 blocks of ", q.block_rows, "x", q.block_cols,
      " are dequantized at load (the device FP8 GEMM takes 128x128 blocks)");
  return false;
}

// The routed experts of an MXFP4 checkpoint stay MXFP4 on a device (the experts kernel quantizes
// the activations per 1x32 as the checkpoint's fp4 input spec says), unless --dtype float32 asks
// for the exact weights, the checkpoint's products were not calibrated with fp4 activations (a
// w4a16 export: the kernel would quantize what the checkpoint does not), or the shapes do not fit
// the kernel. Every other module is dequantized at load.
bool KeepsMxfp4Experts(const io::ModelConfig& config, const LoadOptions& options) {
  const io::QuantizationConfig& q = config.quantization;
  if (q.method != "quark" || options.dtype == "float32") return false;
  if (q.activations != "fp4") {
    Log(LogLevel::kInfo, config.source, ": MXFP4 weights without fp4 activations are dequantized at load on cuda ",
        "(the MXFP4 experts kernel quantizes its activations)");
    return false;
  }
  if (MxExpertsFitCuda(config, options)) return true;
  Log(LogLevel::kWarning, config.source, ": the MXFP4 routed experts are dequantized at load (the CUDA MXFP4 kernel "
      "needs hidden_size and each rank's moe_intermediate_size to be multiples of 8)");
  return false;
}

// One backend per local rank, local rank i on device first + i; ranks meet over NCCL (across nodes
// too: the leader makes every group's unique id and sends them over `link`).
std::unique_ptr<CausalLM> LoadOnCuda(const io::ModelConfig& config, const io::Checkpoint* checkpoint,
                                     const ShardOptions& shard, const LoadOptions& options, int first,
                                     std::unique_ptr<comm::NodeLink> link, const OnlineQuantPlan& plan) {
  const comm::NodeSpan span =
      comm::SpanOfNode(options.tp_size, options.nodes.nnodes, link ? link->node_rank() : 0);
  const int count = CudaDeviceCount();
  if (first + span.count > count)
    Fail("--device cuda:", first, " with ", span.count, " ranks on this node needs CUDA devices ", first, "..",
         first + span.count - 1, ", but ", count, " answer");
  std::vector<std::unique_ptr<kernels::Backend>> backends;
  for (int i = 0; i < span.count; ++i) backends.push_back(kernels::MakeCudaBackend(first + i));
  std::unique_ptr<comm::World> world;
  if (options.tp_size > 1) {
#ifdef FISSION_HAVE_NCCL
    std::vector<int> devices;
    std::vector<cudaStream_t> streams;
    for (int i = 0; i < span.count; ++i) {
      devices.push_back(first + i);
      streams.push_back(static_cast<kernels::cuda::CudaBackend&>(*backends[i]).context().stream());
    }
    if (link) {
      world = std::make_unique<comm::NcclWorld>(LayoutOf(options), span.first, devices, streams,
                                                comm::NcclWorld::ShareUniqueIds(*link, LayoutOf(options)));
    } else {
      world = std::make_unique<comm::NcclWorld>(LayoutOf(options), devices, streams);
    }
#else
    Fail("--tp-size ", options.tp_size, " on cuda needs NCCL, which this build does not have");
#endif
  }
  std::vector<std::unique_ptr<CausalLM>> ranks;
  const bool v4_fp4_experts = KeepsV4Fp4Experts(config, options);
  const auto start = std::chrono::steady_clock::now();
  std::size_t weight_bytes = 0;
  for (int i = 0; i < span.count; ++i) {
    const int r = span.first + i;
    const int device = first + i;
    FISSION_CHECK(cudaSetDevice(device) == cudaSuccess);
    const bool bf16 = options.dtype == "bfloat16";
    ShardOptions device_shard = shard;
    device_shard.kv_dtype = bf16 ? DType::kBF16 : DType::kF32;
    device_shard.index_keys = IndexKeyFormatFor(options.index_keys, device_shard.kv_dtype, shard.latent_format);
    WeightLoader loader(checkpoint, *backends[i], options.dummy_seed, bf16 ? DType::kBF16 : DType::kF32);
    if (KeepsFp8(config, options)) loader.KeepFp8();
    if (KeepsMxfp4Experts(config, options)) loader.KeepMxfp4Experts();
    if (v4_fp4_experts) loader.KeepMxfp4Experts(WeightFormat::Mxfp4A8());
    loader.SetOnlineQuant(&plan);
    auto& cuda_backend = static_cast<kernels::cuda::CudaBackend&>(*backends[i]);
    loader.SetDeviceFill([&cuda_backend](const Tensor& t, float bound, std::uint64_t seed) {
      cuda_backend.FillUniform(t, bound, seed);
    });
    const std::size_t before = cuda_backend.context().allocator()->bytes_in_use();
    auto model = BuildShard(config, loader, device_shard, world ? &world->Groups(r) : nullptr);
    FISSION_CHECK(cudaDeviceSynchronize() == cudaSuccess);  // the copies and fills have landed
    weight_bytes += cuda_backend.context().allocator()->bytes_in_use() - before;
    // Every operation of a rank's thread goes to its device.
    ranks.push_back(std::make_unique<DeviceCausalLM>(std::move(backends[i]), std::move(model),
                                                     [device] { FISSION_CHECK(cudaSetDevice(device) == cudaSuccess); }));
  }
  LogLoaded(weight_bytes, span.count, start, checkpoint == nullptr);
  if (!world) return std::move(ranks[0]);
  return std::make_unique<ParallelCausalLM>(std::move(world), std::move(ranks), std::move(link));
}
#endif

// Expert parallelism's split of the config, checked before any weight is read.
void ValidateExpertParallel(const io::ModelConfig& config, const LoadOptions& options) {
  if (options.ep_size == 1) return;
  if (config.n_routed_experts % options.ep_size != 0)
    Fail("--ep-size ", options.ep_size, " must divide the routed experts (", config.source, ": n_routed_experts ",
         config.n_routed_experts, ")");
  const int moe_tp = options.tp_size / options.ep_size;
  if (config.moe_intermediate_size % moe_tp != 0)
    Fail("--tp-size ", options.tp_size, " / --ep-size ", options.ep_size, " = ", moe_tp,
         " ranks per EP rank must divide moe_intermediate_size (", config.source, ": ", config.moe_intermediate_size,
         ")");
}

}  // namespace

V4ExpertsOnCuda DecideV4ExpertsOnCuda(const io::ModelConfig& config, const LoadOptions& options) {
  if (config.model_type != "deepseek_v4") return {false, false, "not a DeepSeek-V4 model"};
  if (options.dtype == "float32") return {false, false, "--dtype float32 asks for the exact weights"};
  // A dummy model draws its experts as FP4 only when the config says the checkpoint stores them so.
  if (options.load_format == "dummy" && config.quantization.expert_dtype != "fp4") return {false, false, ""};
  const int moe_tp = std::max(1, options.tp_size / std::max(1, options.ep_size));
  const bool fits = config.hidden_size % 32 == 0 && config.moe_intermediate_size % moe_tp == 0 &&
                    (config.moe_intermediate_size / moe_tp) % 32 == 0;
  if (!fits)
    return {false, true,
            StrCat("the CUDA FP4 experts kernel reads whole 1x32 weight groups, so hidden_size (", config.hidden_size,
                   ") and each rank's moe_intermediate_size (", config.moe_intermediate_size, " over ", moe_tp,
                   " ranks) must be multiples of 32")};
  return {true, false, ""};
}

std::unique_ptr<CausalLM> LoadCausalLM(const std::string& dir, const LoadOptions& options) {
  io::ModelConfig config = io::LoadModelConfig(dir, options.json_model_override_args);
  FactoryFor(config);  // an unsupported family is refused before anything is loaded
  ValidateLoadOptions(options);
  ValidateExpertParallel(config, options);
  const DeviceSpec device = ResolveDevice(options.device);
#ifdef FISSION_HAVE_CUDA
  if (device.cuda && config.indexer && config.indexer->topk > kernels::cuda::kCudaMaxIndexTopk)
    Fail(config.source, ": index_topk ", config.indexer->topk, " is larger than the CUDA indexer selects (at most ",
         kernels::cuda::kCudaMaxIndexTopk, ")");
#endif
  if (config.model_type == "deepseek_v4" && (options.dp_size > 1 || options.ep_size > 1))
    Fail(config.source, ": data-parallel attention and expert parallelism (--dp-size ", options.dp_size, ", --ep-size ",
         options.ep_size, ") have not landed for DeepSeek-V4 (its hash-routed MoE and per-request state); use "
         "--tp-size and --attn-cp-size");
  if (config.quantization.method == "quark") {
    const bool fp4_in = config.quantization.activations == "fp4";
    if (device.cuda && fp4_in && options.dtype != "float32")
      Log(LogLevel::kInfo, config.source, ": MXFP4 routed experts (Quark) stay MXFP4 on cuda, their activations ",
          "quantized per 1x32 as the checkpoint's input spec says; the other MXFP4 weights are dequantized exactly at ",
          "load into ", options.dtype == "bfloat16" ? "bf16" : "fp32", " without the fp4 activation quantization");
    else
      Log(LogLevel::kInfo, config.source, ": MXFP4 weights (Quark) are dequantized exactly at load into ",
          device.cuda && options.dtype == "bfloat16" ? "bf16" : "fp32", fp4_in ? "; the checkpoint's fp4 activation quantization is not applied" : "");
  }
  const OnlineQuantPlan plan = PlanOnlineQuant(config, options, device.cuda);
  ShardOptions shard;
  shard.mla_form = ParseMlaForm(options.mla_form);
  shard.pcp_min_tokens = options.pcp_min_tokens;
  shard.indexer_query_split = options.indexer_query_split;
  shard.cuda_graphs = options.cuda_graphs;
  shard.latent_format =
      options.kv_cache_dtype == "fp8_e4m3" ? kernels::LatentFormat::kFp8 : kernels::LatentFormat::kExact;
  shard.index_keys = IndexKeyFormatFor(options.index_keys, shard.kv_dtype, shard.latent_format);
  // Several nodes: agree on the layout and the model before anyone loads weights.
  std::unique_ptr<comm::NodeLink> link;
  if (options.nodes.nnodes > 1) link = comm::NodeLink::Bootstrap(options.nodes, MakeHandshake(dir, options, device));
  std::unique_ptr<io::Checkpoint> checkpoint;
  if (options.load_format != "dummy") checkpoint = std::make_unique<io::Checkpoint>(dir);
  DraftSource draft;
  if (options.load_draft) {
    draft = ResolveDraftSource(config, checkpoint.get(), options);
    shard.load_draft = true;
    shard.draft_checkpoint = draft.checkpoint.get();
    shard.draft_layer = draft.layer;
  }
  if (!device.cuda) {
    // Recipes pass --dtype bfloat16 whatever the device; the reference backend stays fp32.
    if (options.dtype == "bfloat16") Log(LogLevel::kWarning, "--dtype bfloat16: the CPU backend computes in fp32");
    return LoadOnCpu(config, checkpoint.get(), shard, options, std::move(link), plan);
  }
#ifdef FISSION_HAVE_CUDA
  return LoadOnCuda(config, checkpoint.get(), shard, options, device.index, std::move(link), plan);
#else
  Fail("--device ", options.device, ": this build has no CUDA backend (built without nvcc); use --device cpu");
#endif
}

}  // namespace fission::model
