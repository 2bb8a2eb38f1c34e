// Ranks as threads of several processes on the host (CPU, --nnodes > 1): each node runs its share of
// the world's ranks; a group whose members live on one node meets in memory, a group that spans
// nodes meets through its hub — the node of the group's first member — over TCP (a star: the
// others send their members' buffers, the hub computes the result and sends it back).
//
// The hub sums in group-rank order starting from 0, exactly as LocalWorld does, so every layout
// over any number of nodes gives the same bits as one process. This is for correctness and tests,
// not speed. A connection lost in a collective ends the process (exit 1) with a message naming the
// peer: a rank thread has no caller to report to.
#pragma once

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/node_link.h"

namespace fission::comm {

class TcpWorld final : public World {
 public:
  // Runs node `link.node_rank()`'s ranks of `tp_size` in `cp_size` CP groups. Every node constructs
  // its TcpWorld at the same point: the nodes exchange data-listener addresses over `link` and each
  // group that spans nodes gets one connection per node to its hub (within `timeout_s`).
  TcpWorld(int tp_size, int cp_size, NodeLink& link, double timeout_s);
  ~TcpWorld() override;
  const ProcessGroups& Groups(int world_rank) const override;
  int size() const override { return static_cast<int>(groups_.size()); }
  int first_local_rank() const override { return span_.first; }
  int num_local_ranks() const override { return span_.count; }

  struct Group;  // one group's members on this node and its connections (tcp_world.cc)

 private:
  NodeSpan span_;
  std::vector<std::unique_ptr<Group>> shared_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<ProcessGroups> groups_;
};

}  // namespace fission::comm
