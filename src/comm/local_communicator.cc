// Ranks as threads: members publish their buffer pointers, meet at a barrier, and each computes
// its result from everyone's buffers in rank order — so every member gets the same bits.
#include <barrier>
#include <cstring>

#include "comm/communicator.h"

namespace fission::comm {

struct LocalWorld::Shared {
  explicit Shared(int n) : barrier(n), slots(n), counts(n) {}
  std::barrier<> barrier;
  std::vector<const float*> slots;
  std::vector<const std::int64_t*> counts;  // AllToAllV: each member's send counts
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

  // Member r reads its chunk from every member p at p's offset for r (the sum of p's counts for
  // the members before r): a copy, so the bits are the sender's.
  void AllToAllV(const Tensor& in, std::span<const std::int64_t> send_counts, const Tensor& out,
                 std::span<const std::int64_t> recv_counts) override {
    FISSION_CHECK(static_cast<int>(send_counts.size()) == size_ && static_cast<int>(recv_counts.size()) == size_,
                  "AllToAllV takes one count per member");
    const std::size_t element = DTypeBytes(in.dtype, 1);
    FISSION_CHECK(DTypeBytes(out.dtype, 1) == element, "AllToAllV element sizes differ");
    std::int64_t sent = 0;
    for (std::int64_t c : send_counts) sent += c;
    FISSION_CHECK(sent <= in.numel(), "AllToAllV sends ", sent, " elements of ", in.numel());
    shared_->counts[rank_] = send_counts.data();
    Publish(static_cast<const float*>(in.data));
    auto* dst = static_cast<std::byte*>(out.data);
    std::int64_t at = 0;
    for (int p = 0; p < size_; ++p) {
      std::int64_t offset = 0;
      for (int q = 0; q < rank_; ++q) offset += shared_->counts[p][q];
      const std::int64_t n = shared_->counts[p][rank_];
      FISSION_CHECK(n == recv_counts[p], "AllToAllV: member ", p, " sends ", n, " elements to member ", rank_,
                    ", which expects ", recv_counts[p]);
      FISSION_CHECK(at + n <= out.numel(), "AllToAllV receives more than `out` holds");
      if (n > 0)
        std::memcpy(dst + at * element, reinterpret_cast<const std::byte*>(shared_->slots[p]) + offset * element,
                    n * element);
      at += n;
    }
    shared_->barrier.arrive_and_wait();  // every member has read every buffer
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

void ValidateLayout(const LayoutSizes& s) {
  if (s.tp < 1) Fail("--tp-size must be at least 1, got ", s.tp);
  if (s.cp < 1) Fail("--attn-cp-size must be at least 1, got ", s.cp);
  if (s.dp < 1) Fail("--dp-size must be at least 1, got ", s.dp);
  if (s.ep < 1) Fail("--ep-size must be at least 1, got ", s.ep);
  if (s.tp % s.cp != 0) Fail("--attn-cp-size (", s.cp, ") must divide --tp-size (", s.tp, ")");
  if (s.tp % s.dp != 0) Fail("--dp-size (", s.dp, ") must divide --tp-size (", s.tp, ")");
  if (s.tp % (s.dp * s.cp) != 0)
    Fail("--dp-size (", s.dp, ") times --attn-cp-size (", s.cp, ") must divide --tp-size (", s.tp,
         "): each DP attention group splits its ", s.tp / s.dp, " ranks into context-parallel groups");
  if (s.tp % s.ep != 0) Fail("--ep-size (", s.ep, ") must divide --tp-size (", s.tp, ")");
}

Layout MakeLayout(const LayoutSizes& s) {
  ValidateLayout(s);
  const int attn_tp = s.tp / (s.dp * s.cp);
  const int moe_tp = s.tp / s.ep;
  auto rank_of = [&](int d, int c, int a) { return (d * s.cp + c) * attn_tp + a; };
  Layout layout;
  layout.ranks.resize(s.tp);
  for (int r = 0; r < s.tp; ++r) {
    ProcessGroups& g = layout.ranks[r];
    g.world_rank = r;
    g.world_size = s.tp;
    g.dp_size = s.dp;
    g.cp_size = s.cp;
    g.attn_tp_size = attn_tp;
    g.ep_size = s.ep;
    g.attn_tp_rank = r % attn_tp;
    g.cp_rank = (r / attn_tp) % s.cp;
    g.dp_rank = r / (attn_tp * s.cp);
    g.ep_rank = r / moe_tp;
  }
  for (int d = 0; d < s.dp; ++d) {
    for (int c = 0; c < s.cp; ++c) {
      layout.attn_tp_groups.emplace_back();
      for (int a = 0; a < attn_tp; ++a) layout.attn_tp_groups.back().push_back(rank_of(d, c, a));
    }
    for (int a = 0; a < attn_tp; ++a) {
      layout.cp_groups.emplace_back();
      for (int c = 0; c < s.cp; ++c) layout.cp_groups.back().push_back(rank_of(d, c, a));
    }
  }
  if (s.dp > 1) {
    for (int c = 0; c < s.cp; ++c) {
      for (int a = 0; a < attn_tp; ++a) {
        layout.dp_groups.emplace_back();
        for (int d = 0; d < s.dp; ++d) layout.dp_groups.back().push_back(rank_of(d, c, a));
      }
    }
  }
  return layout;
}

LocalWorld::LocalWorld(LayoutSizes sizes) {
  Layout layout = MakeLayout(sizes);
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
  std::vector<int> world(sizes.tp);
  for (int r = 0; r < sizes.tp; ++r) world[r] = r;
  make_group(world, &ProcessGroups::world);
  for (const std::vector<int>& members : layout.attn_tp_groups) make_group(members, &ProcessGroups::attn_tp);
  for (const std::vector<int>& members : layout.cp_groups) make_group(members, &ProcessGroups::cp);
  for (const std::vector<int>& members : layout.dp_groups) make_group(members, &ProcessGroups::dp);
}

LocalWorld::~LocalWorld() = default;

}  // namespace fission::comm
