#include "comm/nccl/nccl_communicator.h"

#include <nccl.h>

#include <cstdlib>

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

}  // namespace

NcclWorld::NcclWorld(int tp_size, int cp_size, std::vector<int> devices, std::vector<cudaStream_t> streams) {
  FISSION_CHECK(static_cast<int>(devices.size()) == tp_size && static_cast<int>(streams.size()) == tp_size);
  // NVLink multicast (NVLS) stays off: it is not needed here and can take shared GPUs out of service.
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  Layout layout = MakeLayout(tp_size, cp_size);
  groups_ = layout.ranks;
  auto make_group = [&](const std::vector<int>& members, Communicator* ProcessGroups::*field) {
    const int n = static_cast<int>(members.size());
    ncclUniqueId id;
    FISSION_NCCL(ncclGetUniqueId(&id));
    std::vector<ncclComm_t> comms(n);
    FISSION_NCCL(ncclGroupStart());
    for (int i = 0; i < n; ++i) {
      FISSION_NCCL_CUDA(cudaSetDevice(devices[members[i]]));
      FISSION_NCCL(ncclCommInitRank(&comms[i], n, id, i));
    }
    FISSION_NCCL(ncclGroupEnd());
    for (int i = 0; i < n; ++i) {
      const int r = members[i];
      communicators_.push_back(std::make_unique<NcclCommunicator>(comms[i], devices[r], streams[r], i, n));
      groups_[r].*field = communicators_.back().get();
    }
  };
  std::vector<int> world(tp_size);
  for (int r = 0; r < tp_size; ++r) world[r] = r;
  make_group(world, &ProcessGroups::world);
  for (const std::vector<int>& members : layout.attn_tp_groups) make_group(members, &ProcessGroups::attn_tp);
  for (const std::vector<int>& members : layout.cp_groups) make_group(members, &ProcessGroups::cp);
}

NcclWorld::~NcclWorld() = default;

}  // namespace fission::comm
