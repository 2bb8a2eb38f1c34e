#include "comm/nccl/nccl_communicator.h"

#include <nccl.h>

#include <cstdlib>
#include <cstring>

namespace fission::comm {
namespace {

#define FISSION_NCCL(call)                                                                        \
  do {                                                                                            \
    const ncclResult_t fission_nccl_result = (call);                                              \
    FISSION_CHECK(fission_nccl_result == ncclSuccess, #call, ": ", ncclGetErrorString(fission_nccl_result)); \
  } while (0)

#define FISSION_NCCL_CUDA(call)                                                                   \
  do {                                                                                            \
    const cudaError_t fission_cuda_result = (call);                                               \
    FISSION_CHECK(fission_cuda_result == cudaSuccess, #call, ": ", cudaGetErrorString(fission_cuda_result)); \
  } while (0)

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    default:
      FISSION_CHECK(false, "NCCL collectives take fp32 or bf16 tensors, got ", DTypeName(dtype));
  }
  return ncclFloat32;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int device, cudaStream_t stream, int rank, int size)
      : comm_(comm), device_(device), stream_(stream), rank_(rank), size_(size) {
    FISSION_NCCL_CUDA(cudaSetDevice(device_));
    FISSION_NCCL_CUDA(cudaMalloc(&token_, sizeof(float)));
  }
  ~NcclCommunicator() override {
    if (cudaSetDevice(device_) == cudaSuccess) {
      cudaStreamSynchronize(stream_);
      cudaFree(token_);
    }
    ncclCommDestroy(comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void AllReduceSum(const Tensor& buffer) override {
    FISSION_NCCL(ncclAllReduce(buffer.data, buffer.data, buffer.numel(), NcclType(buffer.dtype), ncclSum, comm_,
                               stream_));
  }
  void AllGather(const Tensor& in, const Tensor& out) override {
    FISSION_CHECK(out.dtype == in.dtype && out.numel() == in.numel() * size_, "AllGather sizes ", in.numel(), " x ",
                  size_, " vs ", out.numel());
    FISSION_NCCL(ncclAllGather(in.data, out.data, in.numel(), NcclType(in.dtype), comm_, stream_));
  }
  void ReduceScatterSum(const Tensor& in, const Tensor& out) override {
    FISSION_CHECK(out.dtype == in.dtype && in.numel() == out.numel() * size_, "ReduceScatter sizes");
    FISSION_NCCL(ncclReduceScatter(in.data, out.data, out.numel(), NcclType(in.dtype), ncclSum, comm_, stream_));
  }
  void Broadcast(const Tensor& buffer, int root) override {
    FISSION_NCCL(ncclBroadcast(buffer.data, buffer.data, buffer.numel(), NcclType(buffer.dtype), root, comm_,
                               stream_));
  }
  // Point-to-point sends and receives in one NCCL group, so they progress together without
  // deadlock; queued on the stream like the collectives.
  void AllToAllV(const Tensor& in, std::span<const std::int64_t> send_counts, const Tensor& out,
                 std::span<const std::int64_t> recv_counts) override {
    FISSION_CHECK(static_cast<int>(send_counts.size()) == size_ && static_cast<int>(recv_counts.size()) == size_,
                  "AllToAllV takes one count per member");
    FISSION_CHECK(in.dtype == out.dtype, "AllToAllV dtypes differ");
    const std::size_t element = DTypeBytes(in.dtype, 1);
    const ncclDataType_t type = NcclType(in.dtype);
    std::int64_t send_at = 0, recv_at = 0;
    FISSION_NCCL(ncclGroupStart());
    for (int p = 0; p < size_; ++p) {
      if (send_counts[p] > 0)
        FISSION_NCCL(ncclSend(static_cast<const std::byte*>(in.data) + send_at * element,
                              static_cast<std::size_t>(send_counts[p]), type, p, comm_, stream_));
      if (recv_counts[p] > 0)
        FISSION_NCCL(ncclRecv(static_cast<std::byte*>(out.data) + recv_at * element,
                              static_cast<std::size_t>(recv_counts[p]), type, p, comm_, stream_));
      send_at += send_counts[p];
      recv_at += recv_counts[p];
    }
    FISSION_NCCL(ncclGroupEnd());
    FISSION_CHECK(send_at <= in.numel() && recv_at <= out.numel(), "AllToAllV counts exceed the tensors");
  }
  // A one-value all-reduce, then a wait for it: every member has reached this point when it returns.
  void Barrier() override {
    FISSION_NCCL(ncclAllReduce(token_, token_, 1, ncclFloat32, ncclSum, comm_, stream_));
    FISSION_NCCL_CUDA(cudaStreamSynchronize(stream_));
  }

 private:
  ncclComm_t comm_;
  int device_;
  cudaStream_t stream_;
  int rank_, size_;
  void* token_ = nullptr;
};

std::string NewUniqueId() {
  ncclUniqueId id;
  FISSION_NCCL(ncclGetUniqueId(&id));
  return std::string(id.internal, sizeof(id.internal));
}

}  // namespace

NcclWorld::NcclWorld(LayoutSizes sizes, std::vector<int> devices, std::vector<cudaStream_t> streams)
    : num_local_(sizes.tp) {
  FISSION_CHECK(static_cast<int>(devices.size()) == sizes.tp && static_cast<int>(streams.size()) == sizes.tp);
  std::vector<std::string> ids;
  for (int g = 0; g < GroupCount(sizes); ++g) ids.push_back(NewUniqueId());
  Init(sizes, devices, streams, ids);
}

NcclWorld::NcclWorld(LayoutSizes sizes, int first_rank, std::vector<int> devices, std::vector<cudaStream_t> streams,
                     std::vector<std::string> unique_ids)
    : first_rank_(first_rank), num_local_(static_cast<int>(devices.size())) {
  FISSION_CHECK(streams.size() == devices.size() && first_rank >= 0 && first_rank + num_local_ <= sizes.tp);
  FISSION_CHECK(static_cast<int>(unique_ids.size()) == GroupCount(sizes));
  Init(sizes, devices, streams, unique_ids);
}

int NcclWorld::GroupCount(const LayoutSizes& sizes) {
  const Layout layout = MakeLayout(sizes);
  return static_cast<int>(1 + layout.attn_tp_groups.size() + layout.cp_groups.size() + layout.dp_groups.size());
}

std::vector<std::string> NcclWorld::ShareUniqueIds(NodeLink& link, const LayoutSizes& sizes) {
  const int count = GroupCount(sizes);
  std::vector<std::string> ids;
  if (link.leader()) {
    std::string all;
    for (int g = 0; g < count; ++g) {
      ids.push_back(NewUniqueId());
      all += ids.back();
    }
    link.SendToFollowers(ControlMessage::kNcclIds, all);
    return ids;
  }
  const std::string all = link.ReceiveFromLeader(ControlMessage::kNcclIds);
  if (all.size() != static_cast<std::size_t>(count) * NCCL_UNIQUE_ID_BYTES)
    Fail("the leader sent ", all.size(), " bytes of NCCL ids where ", count, " ids of ", NCCL_UNIQUE_ID_BYTES,
         " bytes were due");
  for (int g = 0; g < count; ++g) ids.push_back(all.substr(g * NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES));
  return ids;
}

const ProcessGroups& NcclWorld::Groups(int world_rank) const {
  FISSION_CHECK(world_rank >= first_rank_ && world_rank < first_rank_ + num_local_, "rank ", world_rank,
                " is not on this node");
  return groups_[world_rank];
}

// `devices[i]` and `streams[i]` belong to world rank first_rank_ + i.
void NcclWorld::Init(const LayoutSizes& sizes, const std::vector<int>& devices,
                     const std::vector<cudaStream_t>& streams, const std::vector<std::string>& unique_ids) {
  const int tp_size = sizes.tp;
  // NVLink multicast (NVLS) stays off: it is not needed here and can take shared GPUs out of service.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  Layout layout = MakeLayout(sizes);
  groups_ = layout.ranks;
  int group_index = 0;
  auto make_group = [&](const std::vector<int>& members, Communicator* ProcessGroups::*field) {
    const int n = static_cast<int>(members.size());
    ncclUniqueId id;
    FISSION_CHECK(unique_ids[group_index].size() == sizeof(id.internal));
    std::memcpy(id.internal, unique_ids[group_index].data(), sizeof(id.internal));
    ++group_index;
    std::vector<int> local;  // group ranks on this node
    for (int i = 0; i < n; ++i)
      if (members[i] >= first_rank_ && members[i] < first_rank_ + num_local_) local.push_back(i);
    if (local.empty()) return;
    std::vector<ncclComm_t> comms(local.size());
    FISSION_NCCL(ncclGroupStart());
    for (std::size_t k = 0; k < local.size(); ++k) {
      FISSION_NCCL_CUDA(cudaSetDevice(devices[members[local[k]] - first_rank_]));
      FISSION_NCCL(ncclCommInitRank(&comms[k], n, id, local[k]));
    }
    FISSION_NCCL(ncclGroupEnd());
    for (std::size_t k = 0; k < local.size(); ++k) {
      const int r = members[local[k]];
      communicators_.push_back(std::make_unique<NcclCommunicator>(comms[k], devices[r - first_rank_],
                                                                  streams[r - first_rank_], local[k], n));
      groups_[r].*field = communicators_.back().get();
    }
  };
  std::vector<int> world(tp_size);
  for (int r = 0; r < tp_size; ++r) world[r] = r;
  make_group(world, &ProcessGroups::world);
  for (const std::vector<int>& members : layout.attn_tp_groups) make_group(members, &ProcessGroups::attn_tp);
  for (const std::vector<int>& members : layout.cp_groups) make_group(members, &ProcessGroups::cp);
  for (const std::vector<int>& members : layout.dp_groups) make_group(members, &ProcessGroups::dp);
}

NcclWorld::~NcclWorld() = default;

}  // namespace fission::comm
