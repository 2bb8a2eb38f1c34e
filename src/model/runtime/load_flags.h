// Command-line flags that shape how a model is loaded and laid out, named as SGLang's
// launch_server names them: --tp-size/--tensor-parallel-size, --attn-cp-size,
// --enable-nsa-prefill-context-parallel, --nsa-prefill-cp-mode, --load-format,
// --json-model-override-args, --device, --dtype, --kv-cache-dtype, --quantization, --model-loader-extra-config,
// and the multi-node flags --nnodes, --node-rank,
// --dist-init-addr (--nccl-init-addr), --dist-timeout, the CUDA graph flags --cuda-graph-bs,
// --cuda-graph-max-bs, --disable-cuda-graph; plus Fission's --pcp-min-tokens.
#pragma once

#include <string>
#include <vector>

#include "model/runtime/load_options.h"

namespace fission::model {

// If args[*i] is one of these flags (`--flag value` or `--flag=value`), applies it to `options`,
// advances *i past it and returns true. A bad value is an Error naming the flag.
bool ParseLoadFlag(const std::vector<std::string>& args, std::size_t* i, LoadOptions* options);
// Checks the combination (C divides tp; the context-parallel mode exists).
void ValidateLoadOptions(const LoadOptions& options);
std::string LoadFlagsHelp();

// A --device value: "cpu", "cuda", "cuda:N" or "auto" (resolved by the loader). An Error otherwise.
struct DeviceSpec {
  bool cuda = false;
  bool automatic = false;
  int index = 0;
};
DeviceSpec ParseDevice(const std::string& device);

}  // namespace fission::model
