// Tensor and context parallelism with ranks as threads: one DeepseekV3Model shard per rank, each
// with its own KV cache (on its own device), all running the same step plan (SPMD) and meeting in
// the world's collectives (the local communicator on the CPU, NCCL on GPUs, TCP between the nodes
// of a CPU run). Rank 0's logits are returned (every rank computes the same full logits); the
// caller's cache is rank 0's.
//
// With several nodes (--nnodes) each process runs its share of the ranks. The leader (node 0, which
// has rank 0) runs the engine: before each step it sends the step's plan (model/step_plan.h) to the
// followers, then runs its own ranks. A follower runs RunFollower: receive a plan, run its ranks
// on their own caches, repeat until the leader says shut down. The engine samples on the leader
// and the next plan carries the sampled tokens, so no token broadcast is needed.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/node_link.h"
#include "model/causal_lm.h"

namespace fission::model {

class ParallelCausalLM final : public CausalLM {
 public:
  // `ranks` are the world ranks this process runs, from world->first_local_rank() on. `link`
  // connects the nodes of a multi-node run (null on one node).
  ParallelCausalLM(std::unique_ptr<comm::World> world, std::vector<std::unique_ptr<CausalLM>> ranks,
                   std::unique_ptr<comm::NodeLink> link = nullptr);
  // On the leader: tells the followers to exit.
  ~ParallelCausalLM() override;

  std::string architecture() const override { return ranks_[0]->architecture(); }
  std::int64_t vocab_size() const override { return ranks_[0]->vocab_size(); }
  std::int64_t max_position_embeddings() const override { return ranks_[0]->max_position_embeddings(); }
  std::vector<KvLayerLayout> KvLayout() const override { return ranks_[0]->KvLayout(); }
  // On the process that runs rank 0 only.
  Buffer Forward(const ForwardBatch& batch, KvCache& cache) override;
  // Rank 0's logits, left where rank 0 computed them. Ranks 1.. still run Forward, whose copy to
  // the host also waits for their device before the step returns.
  StepLogits ForwardKeepLogits(const ForwardBatch& batch, KvCache& cache) override;
  Allocator* kv_allocator() override { return ranks_[0]->kv_allocator(); }
  // Every local rank captures at once (their NCCL collectives meet); with several nodes the
  // followers cannot join a capture outside a step plan, so graphs are captured at first use.
  void CaptureDecodeGraphs(KvCache& cache) override;
  std::optional<kernels::DeviceMemory> device_memory() override;

  int world_size() const { return world_->size(); }
  // True on a follower node (it runs RunFollower instead of an engine).
  bool follower() const { return link_ && !link_->leader(); }
  // Rank r's cache paired with the caller's `cache` (rank 0's is `cache` itself).
  const KvCache& RankCache(const KvCache& cache, int rank) const;

  // A follower's loop: runs the leader's step plans until it says shut down. An Error when the
  // leader disappears or sends a plan this node cannot run.
  void RunFollower();

 private:
  // Runs every local rank on `batch` (local rank i on caches[i]); returns local rank 0's logits.
  StepLogits RunLocalRanks(const ForwardBatch& batch, const std::vector<KvCache*>& caches);
  // Local rank 0's `cache` and the other ranks' caches paired with it (made on first use).
  std::vector<KvCache*> LocalCaches(KvCache& cache);
  // Caches of this node's ranks for a follower's cache id, rebuilt when the geometry changes.
  std::vector<KvCache*> FollowerCaches(std::uint32_t cache_id, std::int64_t num_pages, std::int64_t page_size);
  void SendPlan(const ForwardBatch& batch, const KvCache& cache);

  // Destroyed in reverse: the rank caches, then the communicators, then the ranks' models, then
  // the node connections.
  std::unique_ptr<comm::NodeLink> link_;
  std::vector<std::unique_ptr<CausalLM>> ranks_;
  std::unique_ptr<comm::World> world_;
  // Caches of local ranks 1.. for each cache a caller has used, and its id in step plans.
  std::map<const KvCache*, std::vector<std::unique_ptr<KvCache>>> rank_caches_;
  std::map<const KvCache*, std::uint32_t> cache_ids_;
  // A follower's caches (every local rank) per cache id.
  std::map<std::uint32_t, std::vector<std::unique_ptr<KvCache>>> follower_caches_;
};

// Runs `model`'s follower loop; `model` must be the ParallelCausalLM a follower node loaded.
void RunFollower(CausalLM& model);

}  // namespace fission::model
