// Communicators over NCCL for ranks that are GPUs of this process, one thread per GPU (the thread
// that runs a rank's model issues its collectives). A collective is queued on the rank's stream —
// the stream its backend runs every operation on — so it is ordered after the work that produced
// its input and before the work that reads its output, with no host wait.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/node_link.h"

namespace fission::comm {

class NcclWorld final : public World {
 public:
  // Rank r runs on CUDA device `devices[r]` and queues its collectives on `streams[r]`. Creates one
  // NCCL communicator per rank for the world, for its attention-TP group and for its CP group (each
  // group its own unique id, initialised from this thread inside one NCCL group call).
  NcclWorld(LayoutSizes sizes, std::vector<int> devices, std::vector<cudaStream_t> streams);
  // This node's share of a world that spans nodes: world ranks [first_rank, first_rank +
  // devices.size()), local rank i on `devices[i]` and `streams[i]`. `unique_ids` holds the NCCL
  // unique id of every group, in the order GroupCount() describes, the same on every node
  // (ShareUniqueIds). Groups without a member here are skipped; every node initialises the others
  // in the same order, so no two nodes wait on each other.
  NcclWorld(LayoutSizes sizes, int first_rank, std::vector<int> devices, std::vector<cudaStream_t> streams,
            std::vector<std::string> unique_ids);
  ~NcclWorld() override;
  const ProcessGroups& Groups(int world_rank) const override;
  int size() const override { return static_cast<int>(groups_.size()); }
  int first_local_rank() const override { return first_rank_; }
  int num_local_ranks() const override { return num_local_; }

  // The groups of a layout, in id order: the world, the attention-TP groups, the CP groups, the
  // DP groups (Layout's order).
  static int GroupCount(const LayoutSizes& sizes);
  // The leader makes one unique id per group and sends them to the followers, which receive them.
  static std::vector<std::string> ShareUniqueIds(NodeLink& link, const LayoutSizes& sizes);

 private:
  void Init(const LayoutSizes& sizes, const std::vector<int>& devices, const std::vector<cudaStream_t>& streams,
            const std::vector<std::string>& unique_ids);
  int first_rank_ = 0;
  int num_local_ = 0;
  std::vector<ProcessGroups> groups_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
};

}  // namespace fission::comm
