// Collective communication between the ranks of a group. One implementation runs ranks as threads
// of one process (the CPU backend and the tests); NCCL carries tensors between GPUs.
//
// All collectives are called by every member of the group with the same sizes (SPMD). Buffers are
// views on the backend's device (fp32; NCCL also takes bf16).
#pragma once

#include <memory>
#include <vector>

#include "tensor/tensor.h"

namespace fission::comm {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In place: every member's `buffer` becomes the element-wise sum over members.
  virtual void AllReduceSum(const Tensor& buffer) = 0;
  // out = concatenation of every member's `in` along the first dimension, in rank order.
  virtual void AllGather(const Tensor& in, const Tensor& out) = 0;
  // Sums every member's `in` and leaves member r the r-th of size() equal chunks (first dimension).
  virtual void ReduceScatterSum(const Tensor& in, const Tensor& out) = 0;
  // Every member's `buffer` becomes `root`'s.
  virtual void Broadcast(const Tensor& buffer, int root) = 0;
  virtual void Barrier() = 0;
};

// The groups one rank belongs to under SGLang's layout: the world of `tp_size` ranks; for
// attention, `cp_size` context-parallel groups of `tp_size / cp_size` attention-TP ranks.
// World rank r has cp_rank = r / attn_tp_size and attn_tp_rank = r % attn_tp_size.
struct ProcessGroups {
  int world_rank = 0;
  int world_size = 1;
  int cp_rank = 0;
  int cp_size = 1;
  int attn_tp_rank = 0;
  int attn_tp_size = 1;
  Communicator* world = nullptr;
  Communicator* attn_tp = nullptr;  // the ranks that share this rank's tokens, splitting heads
  Communicator* cp = nullptr;       // the ranks with the same attention-TP rank, splitting tokens
};

// The communicators of every rank this process runs. Groups(r) is what world rank r uses. A
// process runs the world ranks [first_local_rank(), first_local_rank() + num_local_ranks()): all of
// them on one node, its share with --nnodes > 1 (comm/node_link.h).
class World {
 public:
  virtual ~World() = default;
  virtual const ProcessGroups& Groups(int world_rank) const = 0;
  // The world size (every node's ranks).
  virtual int size() const = 0;
  virtual int first_local_rank() const { return 0; }
  virtual int num_local_ranks() const { return size(); }
};

// Ranks as threads of one process on the host: `tp_size` ranks, `cp_size` context-parallel groups.
// Owns the communicators.
class LocalWorld final : public World {
 public:
  LocalWorld(int tp_size, int cp_size);
  ~LocalWorld() override;
  const ProcessGroups& Groups(int world_rank) const override { return groups_[world_rank]; }
  int size() const override { return static_cast<int>(groups_.size()); }

  struct Shared;  // the rendezvous state of one group (local_communicator.cc)

 private:
  std::vector<std::shared_ptr<Shared>> shared_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<ProcessGroups> groups_;
};

// Checks a parallel layout and says what is wrong (C must divide tp).
void ValidateLayout(int tp_size, int cp_size);

// The layout of `tp_size` ranks in `cp_size` context-parallel groups: every rank's place (its
// communicators left null) and the members of each group, in group-rank order.
struct Layout {
  std::vector<ProcessGroups> ranks;
  std::vector<std::vector<int>> attn_tp_groups;  // one per cp_rank
  std::vector<std::vector<int>> cp_groups;       // one per attn_tp_rank
};
Layout MakeLayout(int tp_size, int cp_size);

}  // namespace fission::comm
