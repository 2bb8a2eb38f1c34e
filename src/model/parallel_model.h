// Tensor and context parallelism with ranks as threads of one process: one DeepseekV3Model shard
// per rank, each with its own KV cache (on its own device), all running the same step plan (SPMD)
// and meeting in the world's collectives (the local communicator on the CPU, NCCL on GPUs). Rank 0's logits are returned (every rank computes the same
// full logits); the caller's cache is rank 0's.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "model/causal_lm.h"

namespace fission::model {

class ParallelCausalLM final : public CausalLM {
 public:
  ParallelCausalLM(std::unique_ptr<comm::World> world, std::vector<std::unique_ptr<CausalLM>> ranks);
  ~ParallelCausalLM() override;

  std::string architecture() const override { return ranks_[0]->architecture(); }
  std::int64_t vocab_size() const override { return ranks_[0]->vocab_size(); }
  std::int64_t max_position_embeddings() const override { return ranks_[0]->max_position_embeddings(); }
  std::vector<KvLayerLayout> KvLayout() const override { return ranks_[0]->KvLayout(); }
  Buffer Forward(const ForwardBatch& batch, KvCache& cache) override;
  // Rank 0's logits, left where rank 0 computed them. Ranks 1.. still run Forward, whose copy to
  // the host also waits for their device before the step returns.
  StepLogits ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) override;
  Allocator* kv_allocator() override { return ranks_[0]->kv_allocator(); }

  int world_size() const { return static_cast<int>(ranks_.size()); }
  // Rank r's cache paired with the caller's `cache` (rank 0's is `cache` itself).
  const KvCache& RankCache(const KvCache& cache, int rank) const;

 private:
  // Destroyed in reverse: the rank caches, then the communicators, then the ranks' models.
  std::vector<std::unique_ptr<CausalLM>> ranks_;
  std::unique_ptr<comm::World> world_;
  // Caches of ranks 1.. for each cache a caller has used.
  std::map<const KvCache*, std::vector<std::unique_ptr<KvCache>>> rank_caches_;
};

}  // namespace fission::model
