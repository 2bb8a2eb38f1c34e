// DeepSeek-V3 (also R1 and Kimi-K2): embedding, layers of MLA attention and a dense MLP or
// DeepSeekMoE, final norm and lm_head — assembled only from backend operations. One instance is
// one rank's shard: attention heads, vocabulary rows and feed-forward units are split as
// docs/architecture.md describes; a single rank holds everything.
#pragma once

#include <memory>
#include <vector>

#include "io/model_config.h"
#include "model/causal_lm.h"
#include "model/decode_graphs.h"
#include "model/feed_forward.h"
#include "model/layer_context.h"
#include "model/mla_attention.h"

namespace fission::model {

struct ShardOptions {
  RankInfo rank;
  MlaForm mla_form = MlaForm::kAuto;
  int pcp_min_tokens = kDefaultPcpMinTokens;
  // The KV cache's element type: fp32 (exact on the CPU) or bf16 (the CUDA backend's fast path).
  DType kv_dtype = DType::kF32;
  // Decode steps as CUDA graph replays (model/decode_graphs.h) on backends that capture them.
  CudaGraphOptions cuda_graphs;
};

class DeepseekV3Model final : public CausalLM {
 public:
  DeepseekV3Model(io::ModelConfig config, WeightLoader& loader, const ShardOptions& options);

  std::string architecture() const override { return "DeepseekV3ForCausalLM"; }
  std::int64_t vocab_size() const override { return config_.vocab_size; }
  std::int64_t max_position_embeddings() const override { return config_.max_position_embeddings; }
  std::vector<KvLayerLayout> KvLayout() const override;
  Buffer Forward(const ForwardBatch& batch, KvCache& cache) override;
  // On a device the logits stay in its memory.
  StepLogits ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) override;
  const io::ModelConfig& config() const { return config_; }
  void CaptureDecodeGraphs(KvCache& cache) override;
  void ReleaseGraphs() override { graphs_.reset(); }

 private:
  struct Layer {
    Buffer input_layernorm, post_attention_layernorm;
    std::unique_ptr<MlaAttention> attention;
    std::unique_ptr<SwiGluMlp> mlp;
    std::unique_ptr<DeepseekMoe> moe;
  };
  // x [rows, hidden] -> out [rows, hidden]: the feed-forward of this rank's rows, computed over the
  // whole world's shards (gathering the CP group's rows first when the step is split).
  void FeedForward(const Layer& layer, const StepContext& step, const Tensor& x, const Tensor& out);
  // The hidden states of the rows that need logits, in batch order.
  Buffer SelectLogitRows(const StepContext& step, const Tensor& h);
  // Vocab-parallel lm_head: every rank returns the full [rows, vocab] logits, in host memory on the
  // CPU backend and in device memory otherwise.
  StepLogits LmHead(const StepContext& step, const Tensor& rows);
  PcpPlan MakePlan(const ForwardBatch& batch) const;
  // The step's context with its metadata spans on the plan's and the batch's storage.
  StepContext MakeStep(const PcpPlan& plan, const ForwardBatch& batch, const KvCache& cache);
  // Every layer, the final norm and lm_head for the step's rows.
  StepLogits RunStep(const StepContext& step, KvCache& cache);
  // The decode graphs for `cache` (made anew for a new cache); null when graphs are off.
  DecodeGraphs* GraphsFor(const KvCache& cache);
  // A captured step: the padded batch's plan, with every span in the graph's input block.
  DecodeGraphs::StepFn CapturedStep(KvCache& cache);

  io::ModelConfig config_;
  kernels::Backend& backend_;
  ShardOptions options_;
  Range vocab_part_;
  Buffer embed_tokens_, norm_, lm_head_;
  std::vector<Layer> layers_;
  std::vector<int> graph_sizes_;  // empty: every step runs eagerly
  std::unique_ptr<DecodeGraphs> graphs_;
};

}  // namespace fission::model
