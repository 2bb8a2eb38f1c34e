// Tensor and context parallelism with ranks as threads: one DeepseekV3Model shard per rank, each
// with its own KV cache (on its own device), all running the same follower step (SPMD) and meeting in
// the world's collectives (the local communicator on the CPU, NCCL on GPUs, TCP between the nodes
// of a CPU run). Rank 0's logits are returned (every rank computes the same full logits); the
// caller's cache is rank 0's.
//
// With several nodes (--nnodes) each process runs its share of the ranks. The leader (node 0, which
// has rank 0) runs the engine: before each step it sends the step's plan (model/runtime/follower_step.h) to the
// followers, then runs its own ranks. A follower runs RunFollower: receive a plan, run its ranks
// on their own caches, repeat until the leader says shut down. The engine samples on the leader
// and the next plan carries the sampled tokens, so no token broadcast is needed.
#pragma once

#include <functional>
#include <memory>
#include <optional>
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
  MemorySpec Memory() const override { return ranks_[0]->Memory(); }
  // Every local rank's storage (the followers allocate theirs from the next follower step).
  void AllocateMemory(const MemoryPlan& plan) override;
  // On the process that runs rank 0 only: rank 0's logits, left where rank 0 computed them.
  StepLogits Forward(const ForwardBatch& batch) override;
  int dp_size() const override { return world_->Groups(world_->first_local_rank()).dp_size; }
  // Every rank runs its DP group's batch (an empty group its empty step); each group's logits are
  // those of its first rank.
  std::vector<StepLogits> ForwardGroups(const std::vector<ForwardBatch>& batches) override;
  // Rank 0's count, which covers the whole world.
  std::vector<std::int64_t> ExpertLoad() const override { return ranks_[0]->ExpertLoad(); }
  // Every local rank captures at once (their NCCL collectives meet); with several nodes the
  // followers cannot join a capture outside a follower step, so graphs are captured at first use.
  void CaptureDecodeGraphs(std::int32_t draft_steps) override;
  std::optional<kernels::DeviceMemory> device_memory() override;
  bool has_draft() const override { return ranks_[0]->has_draft(); }
  std::int32_t padded_extend_rows() const override { return ranks_[0]->padded_extend_rows(); }
  // Every local rank runs the draft step (one node: draft steps are not sent to followers).
  StepLogits ForwardDraft(const DraftBatch& batch) override;

  int world_size() const { return world_->size(); }
  // True on a follower node (it runs RunFollower instead of an engine).
  bool follower() const { return link_ && !link_->leader(); }
  // Local rank r's shard.
  CausalLM& rank(int r) { return *ranks_[r]; }

  // A follower's loop: runs the leader's follower steps until it says shut down. An Error when the
  // leader disappears or sends a plan this node cannot run.
  void RunFollower();

 private:
  // Runs every local rank on `batch`; returns local rank 0's logits.
  StepLogits RunLocalRanks(const ForwardBatch& batch);
  // Runs `fn(local rank)` on every local rank at once (rank 0 on the calling thread).
  void OnEveryRank(const std::function<void(int)>& fn);
  void SendPlan(const ForwardBatch& batch);

  // Destroyed in reverse: the communicators, then the ranks' models (and their memory), then the
  // node connections.
  std::unique_ptr<comm::NodeLink> link_;
  std::vector<std::unique_ptr<CausalLM>> ranks_;
  std::unique_ptr<comm::World> world_;
  std::optional<MemoryPlan> memory_;  // what every local rank has allocated
};

// Runs `model`'s follower loop; `model` must be the ParallelCausalLM a follower node loaded.
void RunFollower(CausalLM& model);

}  // namespace fission::model
