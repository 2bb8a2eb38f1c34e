// How `LoadCausalLM` (model/runtime/model_loader.h) loads and lays out a model; the flags that set
// these are in model/runtime/load_flags.h.
#pragma once

#include <cstdint>
#include <string>

#include "comm/node_link.h"
#include "model/decode_graphs.h"

namespace fission::model {

struct LoadOptions {
  // "auto" picks the checkpoint's format; "dummy" makes random weights from config.json alone.
  std::string load_format = "auto";
  // JSON object merged over config.json (SGLang's --json-model-override-args).
  std::string json_model_override_args;
  std::uint64_t dummy_seed = 0;
  // MLA form: "auto" (expanded for prefill, absorbed for single-token decode), "expanded" or
  // "absorbed" (tests compare the two).
  std::string mla_form = "auto";
  // Parallel layout (SGLang's --tp-size and --attn-cp-size): ranks run as threads of this process.
  int tp_size = 1;
  int attn_cp_size = 1;
  // Data-parallel attention (--enable-dp-attention --dp-size D): D attention groups of tp / D
  // ranks, each with its own batch and memory, meeting for the feed-forward. 1: off.
  int dp_size = 1;
  bool enable_dp_attention = false;  // --dp-size > 1 needs it (replicas of the whole model have not landed)
  // Expert parallelism (--ep-size): the routed experts split over `ep_size` groups of tp / ep
  // ranks, tokens dispatched to their experts' ranks by all-to-all. 1: tensor-parallel experts.
  int ep_size = 1;
  // Steps with prefill work and at least this many tokens are split over the CP group.
  int pcp_min_tokens = 512;
  // DeepSeek Sparse Attention: split the indexer's queries over the attention-TP group in steps
  // with prefill work (--dsa-indexer-query-split), so that TP stops replicating its scoring.
  bool indexer_query_split = false;
  // SGLang's --nsa-prefill-cp-mode; round-robin-split is the mode implemented.
  std::string cp_mode = "round-robin-split";
  // "cpu" (the reference backend), "cuda" or "cuda:N" (rank r on CUDA device N + r; NCCL between
  // ranks), or "auto" (cuda when this build has the CUDA backend and a device answers, else cpu).
  std::string device = "cpu";
  // Weights and KV cache on a device: "auto" and "float32" keep fp32 (exact against the CPU);
  // "bfloat16" stores matrices and the KV cache in bf16 (activations stay fp32). With "auto" and
  // "bfloat16", a checkpoint's FP8 block-quantized matrices stay FP8 on the device (LinearFp8,
  // MoeExpertsFp8); "float32" dequantizes them. The CPU is fp32 and always dequantizes.
  std::string dtype = "auto";
  // The MLA latent cache (--kv-cache-dtype): "auto" keeps it in --dtype's element type;
  // "fp8_e4m3" stores e4m3 codes with per-128 scales and a bf16 rope part (kernels/mla_ops.h).
  std::string kv_cache_dtype = "auto";
  // SGLang's --quantization: "" (the checkpoint's own) or "fp8", which on an unquantized checkpoint
  // quantizes every quantizable module online into per_block128_fp8 (model/online_quant.h) and on
  // an FP8 checkpoint is its own format.
  std::string quantization;
  // SGLang's --model-loader-extra-config: a JSON object whose `online_quant_config` is ATOM's
  // online quantization (model/online_quant.h); its other keys belong to SGLang's Python loaders
  // and are ignored with a warning.
  std::string model_loader_extra_config;
  // DeepSeek Sparse Attention's indexer keys: "auto" stores them as e4m3 with a per-token scale
  // when the KV cache is bf16 or fp8 (as production engines do) and exactly otherwise; "fp8" and "exact"
  // force one (tests compare the two on the CPU).
  std::string index_keys = "auto";
  // Several nodes (SGLang's --nnodes, --node-rank, --dist-init-addr, --dist-timeout): the world of
  // tp_size ranks is split evenly over the nodes (comm/node_link.h); node 0 runs the engine and
  // the others follow (model::RunFollower).
  comm::NodeOptions nodes;
  // Decode steps as CUDA graph replays on GPUs (--cuda-graph-bs, --cuda-graph-max-bs,
  // --disable-cuda-graph); the CPU always runs eagerly.
  CudaGraphOptions cuda_graphs;
  // Speculative decoding (--speculative-algorithm NEXTN or EAGLE): load the NextN draft layer
  // from `draft_model_path` (--speculative-draft-model-path), or from the target checkpoint's
  // extra layer when empty (model/runtime/draft_source.h).
  bool load_draft = false;
  std::string draft_model_path;
};

// The communicators' layout of these options.
inline comm::LayoutSizes LayoutOf(const LoadOptions& o) {
  return {o.tp_size, o.attn_cp_size, o.dp_size, o.ep_size};
}

}  // namespace fission::model
