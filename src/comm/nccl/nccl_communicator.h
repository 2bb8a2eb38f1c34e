// Communicators over NCCL for ranks that are GPUs of this process, one thread per GPU (the thread
// that runs a rank's model issues its collectives). A collective is queued on the rank's stream —
// the stream its backend runs every operation on — so it is ordered after the work that produced
// its input and before the work that reads its output, with no host wait.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace fission::comm {

class NcclWorld final : public World {
 public:
  // Rank r runs on CUDA device `devices[r]` and queues its collectives on `streams[r]`. Creates one
  // NCCL communicator per rank for the world, for its attention-TP group and for its CP group (each
  // group its own unique id, initialised from this thread inside one NCCL group call).
  NcclWorld(int tp_size, int cp_size, std::vector<int> devices, std::vector<cudaStream_t> streams);
  ~NcclWorld() override;
  const ProcessGroups& Groups(int world_rank) const override { return groups_[world_rank]; }
  int size() const override { return static_cast<int>(groups_.size()); }

 private:
  std::vector<ProcessGroups> groups_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
};

}  // namespace fission::comm
