// Ranks as threads: members publish their buffer pointers, meet at a barrier, and each computes
// its result from everyone's buffers in rank order — so every member gets the same bits.
#include <barrier>
#include <cstring>

#include "comm/communicator.h"

namespace fission::comm {

struct LocalWorld::Shared {
  explicit Shared(int n) : barrier(n), slots(n) {}
  std::barrier<> barrier;
  std::vector<const float*> slots;
};

namespace {

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalWorld::Shared> shared, int rank, int size)
      : shared_(std::move(shared)), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void AllReduceSum(const Tensor& buffer) override {
    const std::int64_t n = buffer.numel();
    std::vector<float> sum(static_cast<std::size_t>(n));
    Publish(buffer.ptr<float>());
    for (std::int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int r = 0; r < size_; ++r) acc += shared_->slots[r][i];
      sum[i] = acc;
    }
    shared_->barrier.arrive_and_wait();  // everyone has read every buffer
    std::memcpy(buffer.data, sum.data(), n * sizeof(float));
  }

  void AllGather(const Tensor& in, const Tensor& out) override {
    const std::int64_t n = in.numel();
    FISSION_CHECK(out.numel() == n * size_, "AllGather sizes ", n, " x ", size_, " vs ", out.numel());
    Publish(in.ptr<float>());
    for (int r = 0; r < size_; ++r) std::memcpy(out.ptr<float>() + r * n, shared_->slots[r], n * sizeof(float));
    shared_->barrier.arrive_and_wait();
  }

  void ReduceScatterSum(const Tensor& in, const Tensor& out) override {
    const std::int64_t chunk = out.numel();
    FISSION_CHECK(in.numel() == chunk * size_, "ReduceScatter sizes");
    Publish(in.ptr<float>());
    std::vector<float> sum(static_cast<std::size_t>(chunk));
    for (std::int64_t i = 0; i < chunk; ++i) {
      float acc = 0.0f;
      for (int r = 0; r < size_; ++r) acc += shared_->slots[r][rank_ * chunk + i];
      sum[i] = acc;
    }
    shared_->barrier.arrive_and_wait();
    std::memcpy(out.data, sum.data(), chunk * sizeof(float));
  }

  void Broadcast(const Tensor& buffer, int root) override {
    Publish(buffer.ptr<float>());
    if (rank_ != root) std::memcpy(buffer.data, shared_->slots[root], buffer.numel() * sizeof(float));
    shared_->barrier.arrive_and_wait();
  }

  void Barrier() override { shared_->barrier.arrive_and_wait(); }

 private:
  void Publish(const float* p) {
    shared_->slots[rank_] = p;
    shared_->barrier.arrive_and_wait();
  }
  std::shared_ptr<LocalWorld::Shared> shared_;
  int rank_;
  int size_;
};

}  // namespace

void ValidateLayout(int tp_size, int cp_size) {
  if (tp_size < 1) Fail("--tp-size must be at least 1, got ", tp_size);
  if (cp_size < 1) Fail("--attn-cp-size must be at least 1, got ", cp_size);
  if (tp_size % cp_size != 0)
    Fail("--attn-cp-size (", cp_size, ") must divide --tp-size (", tp_size, ")");
}

Layout MakeLayout(int tp_size, int cp_size) {
  ValidateLayout(tp_size, cp_size);
  const int attn_tp = tp_size / cp_size;
  Layout layout;
  layout.ranks.resize(tp_size);
  for (int r = 0; r < tp_size; ++r) {
    ProcessGroups& g = layout.ranks[r];
    g.world_rank = r;
    g.world_size = tp_size;
    g.cp_size = cp_size;
    g.attn_tp_size = attn_tp;
    g.cp_rank = r / attn_tp;
    g.attn_tp_rank = r % attn_tp;
  }
  layout.attn_tp_groups.resize(cp_size);
  for (int c = 0; c < cp_size; ++c)
    for (int a = 0; a < attn_tp; ++a) layout.attn_tp_groups[c].push_back(c * attn_tp + a);
  layout.cp_groups.resize(attn_tp);
  for (int a = 0; a < attn_tp; ++a)
    for (int c = 0; c < cp_size; ++c) layout.cp_groups[a].push_back(c * attn_tp + a);
  return layout;
}

LocalWorld::LocalWorld(int tp_size, int cp_size) {
  Layout layout = MakeLayout(tp_size, cp_size);
  groups_ = layout.ranks;
  auto make_group = [&](const std::vector<int>& members, Communicator* ProcessGroups::*field) {
    auto shared = std::make_shared<Shared>(static_cast<int>(members.size()));
    shared_.push_back(shared);
    for (std::size_t i = 0; i < members.size(); ++i) {
      communicators_.push_back(
          std::make_unique<LocalCommunicator>(shared, static_cast<int>(i), static_cast<int>(members.size())));
      groups_[members[i]].*field = communicators_.back().get();
    }
  };
  std::vector<int> world(tp_size);
  for (int r = 0; r < tp_size; ++r) world[r] = r;
  make_group(world, &ProcessGroups::world);
  for (const std::vector<int>& members : layout.attn_tp_groups) make_group(members, &ProcessGroups::attn_tp);
  for (const std::vector<int>& members : layout.cp_groups) make_group(members, &ProcessGroups::cp);
}

LocalWorld::~LocalWorld() = default;

}  // namespace fission::comm
