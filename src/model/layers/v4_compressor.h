// DeepSeek-V4's compressors and CSA's lightning indexer.
//
// A compressor pools each window of `ratio` positions into one KV entry: the tokens' projections
// kv = x·wkv and gate = x·wgate, a softmax over the window (per channel, gate + ape), the weighted
// sum, an RMSNorm and rope at the window's first position. CSA's windows overlap: each token
// projects two halves and entry w pools window w-1's first halves with window w's second halves.
// Entries go into a paged class of `ratio` positions per entry; the projections of a sequence's
// last positions wait in its state slot for the window a later step closes.
//
// CSA's indexer runs a compressor of its own (index_head_dim wide) whose entries are its keys, and
// picks for every query the index_topk entries of highest Σ_h w_h · ReLU(q_h · key).
#pragma once

#include <string>

#include "io/model_config.h"
#include "model/layers/rope.h"
#include "model/layers/v4_step_plan.h"
#include "model/step_context.h"
#include "model/weights.h"

namespace fission::model {

class V4Compressor {
 public:
  // Loads `prefix`{wkv.weight, wgate.weight, ape, norm.weight} (prefix "layers.N.attn.compressor.").
  V4Compressor(const io::ModelConfig& config, const std::string& prefix, std::int64_t head_dim, std::int64_t ratio,
               bool overlap, WeightLoader& loader, const RopeTables& rope);
  // The entries [places, head_dim] of the windows the step closes (the plan's places of this
  // ratio, V4StepPlan::closed; zero rows where none closes; empty when the step has no places),
  // for the caller to store; keeps the step's last positions in `state`.
  Buffer Pool(const StepContext& step, const Tensor& x, const V4StepPlan& plan, const Tensor& state) const;
  std::int64_t ratio() const { return shape_.ratio; }
  std::int64_t state_positions() const { return shape_.state_positions(); }

 private:
  kernels::CompressorShape shape_;
  std::int64_t rope_dim_;
  float norm_eps_;
  Weight wkv_, wgate_;
  Buffer ape_, norm_, inv_freq_;
};

class V4Indexer {
 public:
  // Loads `prefix`{wq_b.weight, weights_proj.weight, compressor.*} (prefix "layers.N.attn.indexer.");
  // its keys are stored in `key_format` (kernels/dsa_ops.h).
  V4Indexer(const io::ModelConfig& config, const std::string& prefix, std::int64_t ratio, WeightLoader& loader,
            const RopeTables& rope, kernels::IndexKeyFormat key_format);
  // selection [rows, index_topk] (I32): per query the chosen entry indices, -1 after the last.
  void Select(const StepContext& step, const Tensor& x, const Tensor& q_latent, const V4StepPlan& plan,
              const Tensor& state, const Tensor& keys, const Tensor& selection) const;
  std::int64_t state_positions() const { return compressor_.state_positions(); }

 private:
  kernels::IndexerShape shape_;
  std::int64_t rope_dim_;
  V4Compressor compressor_;
  Weight wq_b_, weights_proj_;
  Buffer inv_freq_;
};

}  // namespace fission::model
