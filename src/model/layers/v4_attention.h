// DeepSeek-V4's attention: a query LoRA (wq_a, q_norm, wq_b) with a weightless RMSNorm per head,
// one shared KV head (wkv, kv_norm) used as key and value, rope on the trailing dims (the layer's
// rope: plain for sliding-window layers, compress_rope_theta + YaRN for the others), attention over
// the last sliding_window positions plus the layer's compressed entries with a learnt sink per
// head, the rope undone on the output, and a grouped output LoRA (wo_a per head group, wo_b).
//
// Tensor parallelism splits the heads, hence the output groups, over the attention-TP group
// (wq_b rows, wo_a rows, wo_b columns, the sinks); the KV head, the compressors and the indexer are
// replicated on every rank.
#pragma once

#include <memory>
#include <vector>

#include "model/layers/v4_compressor.h"

namespace fission::model {

// One layer's storage (model/model_memory.h), as DeepseekV4Model lays it out. Unused tensors of a
// sliding-window layer stay empty.
struct V4LayerMemory {
  Tensor window;          // per-request ring [slots · window, head_dim]
  Tensor entries;         // paged compressed entries [entries, head_dim]
  Tensor state;           // the compressor's carry-over
  Tensor index_keys;      // CSA: the indexer's paged keys
  Tensor index_state;     // CSA: the indexer compressor's carry-over
};

// How the CSA indexer's keys are stored next to window keys and entries of `format`: e4m3 with a
// per-key scale beside fp8 entries (DSA's rule, kernels/dsa_ops.h), exactly otherwise.
class V4Attention {
 public:
  // `format`: how the window ring and the entries are stored; `index_keys`: the CSA indexer's keys.
  V4Attention(const io::ModelConfig& config, std::int64_t layer, WeightLoader& loader, const RankInfo& rank,
              const RopeTables& main_rope, const RopeTables& compress_rope, kernels::V4KvFormat format,
              kernels::IndexKeyFormat index_keys);
  // out [rows, hidden]: this rank's partial sum (the caller reduces it over the attention-TP group).
  void Forward(const StepContext& step, const Tensor& x, const V4StepPlan& plan, const V4LayerMemory& memory,
               const Tensor& out) const;

  io::V4Attention kind() const { return kind_; }
  std::int64_t ratio() const { return ratio_; }
  // The lengths of the per-request rings its compressors keep (V4StepPlan::ring_slots).
  std::vector<std::int64_t> state_rings() const;

 private:
  const io::ModelConfig& config_;
  io::V4Attention kind_;
  std::int64_t ratio_;
  std::int64_t heads_, groups_;  // this rank's
  float eps_;
  kernels::V4KvFormat format_;
  Weight wq_a_, wq_b_, wkv_, wo_b_;
  Buffer q_norm_, kv_norm_, head_norm_, wo_a_, sinks_, inv_freq_;
  std::unique_ptr<V4Compressor> compressor_;
  std::unique_ptr<V4Indexer> indexer_;
};

}  // namespace fission::model
