#include "model/runtime/load_flags.h"

#include "base/error.h"
#include "comm/communicator.h"

namespace fission::model {
namespace {

int ParsePositive(const std::string& flag, const std::string& value) {
  try {
    std::size_t used = 0;
    const long v = std::stol(value, &used);
    if (used == value.size() && v >= 1 && v <= 1 << 20) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  Fail(flag, " expects a positive integer, got '", value, "'");
}

bool IsPositiveInteger(const std::string& s) {
  return !s.empty() && s.size() <= 7 && s.find_first_not_of("0123456789") == std::string::npos && std::stol(s) >= 1;
}

// --cuda-graph-bs takes sizes as SGLang does (`--cuda-graph-bs 1 2 4`) and comma lists
// (`--cuda-graph-bs=1,2,4`).
bool ParseGraphSizes(const std::vector<std::string>& args, std::size_t* i, bool inline_value, const std::string& value,
                     LoadOptions* options) {
  std::vector<std::string> items;
  auto add_list = [&](const std::string& list) {
    std::size_t from = 0;
    while (true) {
      const std::size_t comma = list.find(',', from);
      items.push_back(list.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
      if (comma == std::string::npos) break;
      from = comma + 1;
    }
  };
  std::size_t next = *i + 1;
  if (inline_value) {
    add_list(value);
  } else {
    while (next < args.size() && args[next].rfind("--", 0) != 0) add_list(args[next++]);
  }
  if (items.empty()) Fail("--cuda-graph-bs needs at least one batch size");
  options->cuda_graphs.batch_sizes.clear();
  for (const std::string& item : items) {
    if (!IsPositiveInteger(item)) Fail("--cuda-graph-bs expects positive integers, got '", item, "'");
    options->cuda_graphs.batch_sizes.push_back(ParsePositive("--cuda-graph-bs", item));
  }
  *i = next;
  return true;
}

}  // namespace

bool ParseLoadFlag(const std::vector<std::string>& args, std::size_t* i, LoadOptions* options) {
  std::string flag = args[*i], value;
  bool inline_value = false;
  if (const auto eq = flag.find('='); eq != std::string::npos) {
    value = flag.substr(eq + 1);
    flag = flag.substr(0, eq);
    inline_value = true;
  }
  if (flag == "--disable-cuda-graph") {
    options->cuda_graphs.disabled = true;
    *i += 1;
    return true;
  }
  if (flag == "--cuda-graph-bs") return ParseGraphSizes(args, i, inline_value, value, options);
  if (flag == "--dsa-indexer-query-split") {
    options->indexer_query_split = true;
    *i += 1;
    return true;
  }
  if (flag == "--enable-dp-attention") {
    options->enable_dp_attention = true;
    *i += 1;
    return true;
  }
  if (flag == "--enable-nsa-prefill-context-parallel") {
    // Context parallelism is on whenever --attn-cp-size > 1; the flag is accepted for recipes.
    *i += 1;
    return true;
  }
  static const char* kValued[] = {"--tp-size", "--tensor-parallel-size", "--attn-cp-size", "--nsa-prefill-cp-mode",
                                  "--load-format", "--json-model-override-args", "--device", "--dtype",
                                  "--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr",
                                  "--dist-timeout", "--pcp-min-tokens", "--cuda-graph-max-bs",
                                  "--speculative-draft-model-path", "--quantization", "--model-loader-extra-config",
                                  "--dp-size", "--data-parallel-size", "--dp", "--ep-size", "--expert-parallel-size",
                                  "--ep", "--kv-cache-dtype"};
  bool known = false;
  for (const char* k : kValued) known = known || flag == k;
  if (!known) return false;
  if (!inline_value) {
    if (*i + 1 >= args.size()) Fail(flag, " needs a value");
    value = args[*i + 1];
  }
  if (flag == "--tp-size" || flag == "--tensor-parallel-size") {
    options->tp_size = ParsePositive(flag, value);
  } else if (flag == "--attn-cp-size") {
    options->attn_cp_size = ParsePositive(flag, value);
  } else if (flag == "--dp-size" || flag == "--data-parallel-size" || flag == "--dp") {
    options->dp_size = ParsePositive(flag, value);
  } else if (flag == "--ep-size" || flag == "--expert-parallel-size" || flag == "--ep") {
    options->ep_size = ParsePositive(flag, value);
  } else if (flag == "--nsa-prefill-cp-mode") {
    options->cp_mode = value;
  } else if (flag == "--dtype") {
    options->dtype = value;
  } else if (flag == "--device") {
    options->device = value;
  } else if (flag == "--nnodes") {
    options->nodes.nnodes = ParsePositive(flag, value);
  } else if (flag == "--node-rank") {
    options->nodes.node_rank = value == "0" ? 0 : ParsePositive(flag, value);
  } else if (flag == "--dist-init-addr" || flag == "--nccl-init-addr") {
    options->nodes.dist_init_addr = value;
  } else if (flag == "--dist-timeout") {
    options->nodes.timeout_s = ParsePositive(flag, value);
  } else if (flag == "--cuda-graph-max-bs") {
    options->cuda_graphs.max_batch_size = ParsePositive(flag, value);
  } else if (flag == "--speculative-draft-model-path") {
    options->draft_model_path = value;
  } else if (flag == "--pcp-min-tokens") {
    options->pcp_min_tokens = ParsePositive(flag, value);
  } else if (flag == "--quantization") {
    options->quantization = value;
  } else if (flag == "--model-loader-extra-config") {
    options->model_loader_extra_config = value;
  } else if (flag == "--load-format") {
    options->load_format = value;
  } else if (flag == "--kv-cache-dtype") {
    options->kv_cache_dtype = value == "bf16" || value == "bfloat16" ? "auto" : value;  // bf16 rows are auto's
  } else {
    options->json_model_override_args = value;
  }
  *i += inline_value ? 1 : 2;
  return true;
}

DeviceSpec ParseDevice(const std::string& device) {
  DeviceSpec spec;
  if (device == "cpu") return spec;
  if (device == "auto") {
    spec.automatic = true;
    return spec;
  }
  spec.cuda = true;
  if (device == "cuda") return spec;
  if (device.starts_with("cuda:")) {
    const std::string index = device.substr(5);
    if (!index.empty() && index.size() <= 3 && index.find_first_not_of("0123456789") == std::string::npos) {
      spec.index = std::stoi(index);
      return spec;
    }
  }
  Fail("--device '", device, "' is not a device (expected cpu, cuda, cuda:N or auto)");
}

void ValidateLoadOptions(const LoadOptions& options) {
  comm::ValidateLayout(LayoutOf(options));
  comm::ValidateNodeOptions(options.nodes, options.tp_size);
  // SGLang's --dp-size alone means replicas of the whole model, each with its own scheduler.
  if (options.dp_size > 1 && !options.enable_dp_attention)
    Fail("--dp-size ", options.dp_size, " without --enable-dp-attention (data-parallel replicas of the whole model) ",
         "has not landed; add --enable-dp-attention for data-parallel attention groups");
  if (options.load_draft && (options.dp_size > 1 || options.ep_size > 1))
    Fail("speculative decoding with --dp-size ", options.dp_size, " and --ep-size ", options.ep_size,
         " has not landed (draft steps run the same batch on every rank); use --dp-size 1 --ep-size 1");
  if (options.nodes.nnodes > 1 && (options.dp_size > 1 || options.ep_size > 1))
    Fail("--nnodes ", options.nodes.nnodes, " with --dp-size ", options.dp_size, " and --ep-size ", options.ep_size,
         ": data-parallel attention and expert parallelism run on one node (use --nnodes 1)");
  if (options.cp_mode != "round-robin-split")
    Fail("--nsa-prefill-cp-mode '", options.cp_mode, "' is not supported (supported modes: round-robin-split)");
  ParseDevice(options.device);
  if (options.dtype != "auto" && options.dtype != "float32" && options.dtype != "bfloat16")
    Fail("--dtype '", options.dtype, "' is not supported (supported: auto, float32, bfloat16)");
  if (options.kv_cache_dtype != "auto" && options.kv_cache_dtype != "fp8_e4m3")
    Fail("--kv-cache-dtype ", options.kv_cache_dtype, " is not supported (supported: auto, bf16, fp8_e4m3)");
  if (options.index_keys != "auto" && options.index_keys != "fp8" && options.index_keys != "exact")
    Fail("index key storage '", options.index_keys, "' is not supported (supported: auto, fp8, exact)");
  if (!options.quantization.empty() && options.quantization != "fp8")
    Fail("--quantization ", options.quantization, ": only fp8 has landed (block-scaled FP8: the checkpoint's own, or ",
         "per_block128_fp8 online on an unquantized checkpoint); mxfp4, mxfp8 and ptpc_fp8 are online formats of ",
         "--model-loader-extra-config");
  if (options.load_format != "auto" && options.load_format != "safetensors" && options.load_format != "dummy")
    Fail("--load-format '", options.load_format, "' is not supported (supported: auto, safetensors, dummy)");
}

std::string LoadFlagsHelp() {
  return "  --tp-size N, --tensor-parallel-size N   ranks (threads on the CPU) sharing the model (default 1)\n"
         "  --attn-cp-size C          prefill context-parallel groups; C divides the tp size (default 1)\n"
         "  --enable-dp-attention --dp-size D   D data-parallel attention groups of tp / D ranks, each its own\n"
         "                            batch and KV pool; D · C divides the tp size (default 1)\n"
         "  --ep-size E               routed experts split over E groups of tp / E ranks (all-to-all; default 1)\n"
         "  --enable-nsa-prefill-context-parallel   accepted; context parallelism follows --attn-cp-size\n"
         "  --nsa-prefill-cp-mode M   round-robin-split (the only mode)\n"
         "  --load-format F           auto | safetensors | dummy (random weights from config.json)\n"
         "  --json-model-override-args JSON   merged over config.json\n"
         "  --device D                cpu | cuda | cuda:N (ranks on devices N, N+1, ...) | auto (default cpu)\n"
         "  --dtype T                 auto | float32 | bfloat16 (bf16 weights and KV cache on cuda; default fp32)\n"
         "  --speculative-draft-model-path PATH  the NextN draft layer's checkpoint (default: the target's own)\n"
         "  --quantization fp8        block FP8: the checkpoint's, or per_block128_fp8 online on a bf16/fp32 one\n"
         "  --model-loader-extra-config JSON   {\"online_quant_config\": {...}}: online quantization per module\n"
         "  --pcp-min-tokens N        split prefill steps of at least N tokens over the CP group (default 512)\n"
         "  --dsa-indexer-query-split split DSA's indexer queries over the attention-TP ranks in prefill steps\n"
         "                            (each scores a share, the selections are all-gathered; default off)\n"
         "  --cuda-graph-bs N...      decode batch sizes run as CUDA graphs (default 1 2 4 8 12 16 24 32 40 ... max)\n"
         "  --cuda-graph-max-bs N     the largest default CUDA graph batch size (default 256)\n"
         "  --disable-cuda-graph      run every decode step eagerly\n"
         "several nodes (docs/multinode.md):\n"
         "  --nnodes N                processes sharing the --tp-size ranks evenly (default 1)\n"
         "  --node-rank R             this process's node; 0 runs the engine, others follow (default 0)\n"
         "  --dist-init-addr HOST:PORT   where node 0 listens for the others\n"
         "  --dist-timeout S          seconds node 0 waits for the others and they retry (default 300)\n";
}

}  // namespace fission::model
