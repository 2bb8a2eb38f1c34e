// The runtime's assembly: from a checkpoint directory and the load options to a model the engine
// can run, with its devices (one backend per rank), its ranks' worlds (threads of this process,
// NCCL between GPUs, TCP between the nodes of a CPU run), the multi-node handshake, and the
// weight policy (dtype, FP8 kept or dequantized, dummy weights). The family comes from
// model/registry.h.
#pragma once

#include <memory>
#include <string>

#include "io/model_config.h"
#include "model/causal_lm.h"
#include "model/runtime/load_options.h"

namespace fission::model {

// What DeepSeek-V4's FP4 routed experts (layers.N.ffn.experts.E.w1/w2/w3) become on --device cuda,
// decided from the config and the options before any weight is read: kept as stored, in
// WeightFormat::Mxfp4A8 (the W4A8 experts kernel decodes them in registers and multiplies e4m3
// activations quantized per 1x128, as DeepSeek-V4's reference does), or dequantized at load like
// every other weight. `why` says why they are not kept
// (empty when nothing is worth saying); `warn` when the reason is one the user did not ask for (the
// shapes do not fit the kernel). Kept unless --dtype float32 (the exact weights), or --load-format
// dummy without the config declaring FP4 experts (expert_dtype "fp4"; dummy weights are then drawn as
// before), or hidden_size or a rank's share of moe_intermediate_size is not a multiple of 32 (the
// kernel reads whole 1x32 groups, and a down slice must hold whole groups). A
// real checkpoint keeps each expert the checkpoint stores as FP4 (io::Checkpoint::IsMxfp4).
struct V4ExpertsOnCuda {
  bool keep = false;
  bool warn = false;
  std::string why;
};
V4ExpertsOnCuda DecideV4ExpertsOnCuda(const io::ModelConfig& config, const LoadOptions& options);

// Loads the checkpoint in `dir`. An Error names the file and the field or tensor that is wrong.
std::unique_ptr<CausalLM> LoadCausalLM(const std::string& dir, const LoadOptions& options = {});

}  // namespace fission::model
