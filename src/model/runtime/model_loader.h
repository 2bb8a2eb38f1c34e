// The runtime's assembly: from a checkpoint directory and the load options to a model the engine
// can run, with its devices (one backend per rank), its ranks' worlds (threads of this process,
// NCCL between GPUs, TCP between the nodes of a CPU run), the multi-node handshake, and the
// weight policy (dtype, FP8 kept or dequantized, dummy weights). The family comes from
// model/registry.h.
#pragma once

#include <memory>
#include <string>

#include "model/causal_lm.h"
#include "model/runtime/load_options.h"

namespace fission::model {

// Loads the checkpoint in `dir`. An Error names the file and the field or tensor that is wrong.
std::unique_ptr<CausalLM> LoadCausalLM(const std::string& dir, const LoadOptions& options = {});

}  // namespace fission::model
