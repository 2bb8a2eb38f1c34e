// Collective communication between the ranks of a group. One implementation runs ranks as threads
// of one process (the CPU backend and the tests); NCCL carries tensors between GPUs.
//
// All collectives are called by every member of the group with the same sizes (SPMD). Buffers are
// views on the backend's device (fp32; NCCL also takes bf16).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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
  // Personalised exchange: member r sends `send_counts[p]` elements of `in` to member p (the
  // chunks lie in `in` in member order) and receives `recv_counts[p]` elements from member p into
  // `out`, also in member order. Counts are elements of the tensors' dtype; every member's
  // send_counts[p] must equal member p's recv_counts[r]. A member may send or receive nothing.
  virtual void AllToAllV(const Tensor& in, std::span<const std::int64_t> send_counts, const Tensor& out,
                         std::span<const std::int64_t> recv_counts) = 0;
  virtual void Barrier() = 0;
};

// The sizes of a parallel layout (SGLang's --tp-size, --attn-cp-size, --dp-size with
// --enable-dp-attention, --ep-size).
struct LayoutSizes {
  int tp = 1;
  int cp = 1;
  int dp = 1;
  int ep = 1;
};

// The groups one rank belongs to under SGLang's layout: the world of `tp` ranks; for attention,
// `dp` data-parallel attention groups (each its own batch), each split into `cp` context-parallel
// groups of `tp / (dp · cp)` attention-TP ranks. World rank r has attn_tp_rank = r % attn_tp_size,
// cp_rank = (r / attn_tp_size) % cp_size and dp_rank = r / (attn_tp_size · cp_size). For the
// routed experts, `ep` expert-parallel ranks of `tp / ep` ranks each: ep_rank = r / (tp / ep).
struct ProcessGroups {
  int world_rank = 0;
  int world_size = 1;
  int dp_rank = 0;
  int dp_size = 1;
  int cp_rank = 0;
  int cp_size = 1;
  int attn_tp_rank = 0;
  int attn_tp_size = 1;
  int ep_rank = 0;
  int ep_size = 1;
  int moe_tp_size() const { return world_size / ep_size; }  // ranks sharing one EP rank's experts
  Communicator* world = nullptr;
  Communicator* attn_tp = nullptr;  // the ranks that share this rank's tokens, splitting heads
  Communicator* cp = nullptr;       // the ranks of this DP group with the same attention-TP rank, splitting tokens
  // The ranks with this rank's CP and attention-TP ranks in every DP group, in DP order: where the
  // groups' rows meet for the feed-forward. Null with one DP group.
  Communicator* dp = nullptr;
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

// Ranks as threads of one process on the host, laid out by `sizes`. Owns the communicators.
class LocalWorld final : public World {
 public:
  explicit LocalWorld(LayoutSizes sizes);
  LocalWorld(int tp_size, int cp_size) : LocalWorld(LayoutSizes{tp_size, cp_size}) {}
  ~LocalWorld() override;
  const ProcessGroups& Groups(int world_rank) const override { return groups_[world_rank]; }
  int size() const override { return static_cast<int>(groups_.size()); }

  struct Shared;  // the rendezvous state of one group (local_communicator.cc)

 private:
  std::vector<std::shared_ptr<Shared>> shared_;
  std::vector<std::unique_ptr<Communicator>> communicators_;
  std::vector<ProcessGroups> groups_;
};

// Checks a parallel layout and says what is wrong, naming the flags: dp · cp must divide tp, ep
// must divide tp.
void ValidateLayout(const LayoutSizes& sizes);
inline void ValidateLayout(int tp_size, int cp_size) { ValidateLayout(LayoutSizes{tp_size, cp_size}); }

// The layout of `sizes`: every rank's place (its communicators left null) and the members of each
// group, in group-rank order.
struct Layout {
  std::vector<ProcessGroups> ranks;
  std::vector<std::vector<int>> attn_tp_groups;  // one per (dp_rank, cp_rank), dp-major
  std::vector<std::vector<int>> cp_groups;       // one per (dp_rank, attn_tp_rank), dp-major
  std::vector<std::vector<int>> dp_groups;       // one per (cp_rank, attn_tp_rank); empty with one DP group
};
Layout MakeLayout(const LayoutSizes& sizes);
inline Layout MakeLayout(int tp_size, int cp_size) { return MakeLayout(LayoutSizes{tp_size, cp_size}); }

}  // namespace fission::comm
