// DeepSeek-V3/R1's multi-token prediction (MTP) module, the NextN layer of speculative decoding:
//   h = eh_proj([enorm(embed(next token)); hnorm(previous hidden)])
//   h = decoder layer(h)            (MLA attention over its own latent cache, and DeepSeekMoE)
//   out = shared_head.norm(h)       (then the target's lm_head)
// Its weights are a checkpoint's `model.layers.{N}.*` (N = num_hidden_layers in the target's own
// checkpoint, 0 in SGLang's NextN export); the copies of embed_tokens and shared_head.head that
// some checkpoints carry there are not read: the target's embedding and lm_head serve.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/draft_head.h"
#include "model/layers/deepseek_layer.h"

namespace fission::model {

class NextnLayer final : public DraftHead {
 public:
  // Loads the layer under `prefix` ("model.layers.N."). Under tensor parallelism eh_proj and the
  // norms are replicated and the decoder layer is sharded like the target's.
  NextnLayer(const io::ModelConfig& config, const std::string& prefix, WeightLoader& loader, const RopeTables& rope,
             const RankInfo& rank, kernels::LatentFormat latent_format, DType kv_dtype);

  // One paged class, `nextn_latent`: the MLA latent row of every token in the NextN layer.
  std::vector<CacheClass> Memory() const override;
  void Forward(const StepContext& step, const Tensor& embedded, const Tensor& previous, int first_class,
               const Tensor& out) const override;

  // Tensors the layer needs under `prefix` that `has` (a checkpoint's lookup) does not find, so
  // a missing layer is refused before any weight is read.
  static std::vector<std::string> MissingTensors(const std::string& prefix,
                                                 const std::function<bool(const std::string&)>& has);

 private:
  io::ModelConfig config_;
  kernels::LatentFormat latent_format_;
  DType kv_dtype_;
  float eps_;
  Buffer enorm_, hnorm_, shared_head_norm_;
  // eh_proj [hidden, 2·hidden] as its two column halves: the embedding's and the hidden state's
  // (the concatenation is never built; the two products are added).
  Weight eh_embed_, eh_hidden_;
  DeepseekLayer decoder_;
};

}  // namespace fission::model
