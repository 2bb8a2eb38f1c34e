// The TCP communicator over several nodes (threads over sockets here) gives the same bits as the
// in-process LocalWorld for every collective and layout.
#include "comm/tcp_world.h"

#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <random>
#include <thread>

namespace fission::comm {
namespace {

Tensor View(std::vector<float>& v) {
  Tensor t;
  t.data = v.data();
  t.shape = Shape({static_cast<std::int64_t>(v.size())});
  return t;
}

std::vector<float> Values(std::size_t n, std::uint64_t seed) {
  // Mixed magnitudes, so a different summation order gives different bits.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = u(rng) * (i % 3 == 0 ? 1e7f : i % 3 == 1 ? 1.0f : 1e-3f);
  return v;
}

// The same SPMD script on one rank; returns every output in order.
std::vector<float> Script(const ProcessGroups& g) {
  std::vector<float> out;
  auto keep = [&out](const std::vector<float>& v) { out.insert(out.end(), v.begin(), v.end()); };
  const std::uint64_t seed = 1000 * g.world_rank;
  std::vector<float> a = Values(37, seed + 1);
  g.world->AllReduceSum(View(a));
  keep(a);
  std::vector<float> b = Values(5, seed + 2), gathered(5 * g.attn_tp_size);
  g.attn_tp->AllGather(View(b), View(gathered));
  keep(gathered);
  std::vector<float> c = Values(11, seed + 3);
  g.cp->AllReduceSum(View(c));
  keep(c);
  std::vector<float> d = Values(3 * g.world_size, seed + 4), chunk(3);
  g.world->ReduceScatterSum(View(d), View(chunk));
  keep(chunk);
  std::vector<float> e = Values(9, seed + 5);
  g.world->Broadcast(View(e), g.world_size - 1);
  keep(e);
  std::vector<float> f = Values(4, seed + 6), cp_gathered(4 * g.cp_size);
  g.cp->AllGather(View(f), View(cp_gathered));
  keep(cp_gathered);
  std::vector<float> h = Values(6, seed + 7);
  g.attn_tp->Broadcast(View(h), 0);
  keep(h);
  g.world->Barrier();
  g.cp->Barrier();
  std::vector<float> empty;
  g.world->AllReduceSum(View(empty));
  return out;
}

std::vector<std::vector<float>> RunLocal(int tp, int cp) {
  LocalWorld world(tp, cp);
  std::vector<std::vector<float>> outputs(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) threads.emplace_back([&, r] { outputs[r] = Script(world.Groups(r)); });
  for (std::thread& t : threads) t.join();
  return outputs;
}

std::vector<std::vector<float>> RunOverTcp(int tp, int cp, int nnodes) {
  const Handshake handshake = {{"--tp-size", std::to_string(tp)}};
  Socket listener = Listen({"127.0.0.1", 0}, "test");
  const HostPort address = listener.LocalAddress();
  std::vector<std::vector<float>> outputs(tp);
  std::vector<std::thread> nodes;
  for (int node = 0; node < nnodes; ++node) {
    nodes.emplace_back([&, node] {
      std::unique_ptr<NodeLink> link = node == 0 ? NodeLink::Lead(std::move(listener), nnodes, handshake, 10)
                                                 : NodeLink::Follow(address, node, nnodes, handshake, 10);
      TcpWorld world(tp, cp, *link, 10);
      EXPECT_EQ(world.size(), tp);
      EXPECT_EQ(world.num_local_ranks(), tp / nnodes);
      std::vector<std::thread> ranks;
      for (int i = 0; i < world.num_local_ranks(); ++i) {
        const int r = world.first_local_rank() + i;
        ranks.emplace_back([&, r] { outputs[r] = Script(world.Groups(r)); });
      }
      for (std::thread& t : ranks) t.join();
    });
  }
  for (std::thread& t : nodes) t.join();
  return outputs;
}

void ExpectSameBits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t r = 0; r < a.size(); ++r) {
    ASSERT_EQ(a[r].size(), b[r].size()) << "rank " << r;
    EXPECT_EQ(std::memcmp(a[r].data(), b[r].data(), a[r].size() * sizeof(float)), 0) << "rank " << r;
  }
}

struct LayoutCase {
  int tp, cp, nnodes;
};

class TcpWorldTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(TcpWorldTest, SameBitsAsLocalWorld) {
  const LayoutCase c = GetParam();
  ExpectSameBits(RunOverTcp(c.tp, c.cp, c.nnodes), RunLocal(c.tp, c.cp));
}

// tp 4 / cp 2 over 4 nodes has attention-TP groups on two followers only (hub = node 2).
INSTANTIATE_TEST_SUITE_P(Layouts, TcpWorldTest,
                         ::testing::Values(LayoutCase{2, 1, 2}, LayoutCase{4, 1, 2}, LayoutCase{4, 2, 2},
                                           LayoutCase{4, 2, 4}, LayoutCase{8, 2, 4}, LayoutCase{8, 4, 2}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.tp) + "cp" + std::to_string(info.param.cp) +
                                  "nodes" + std::to_string(info.param.nnodes);
                         });

// The script's sums really depend on the order: a different order gives different bits.
TEST(TcpWorldScript, SumsAreOrderSensitive) {
  float forward = 0.0f, backward = 0.0f;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < 4; ++r) inputs.push_back(Values(37, 1000 * r + 1));
  int differing = 0;
  for (int i = 0; i < 37; ++i) {
    forward = backward = 0.0f;
    for (int r = 0; r < 4; ++r) forward += inputs[r][i];
    for (int r = 3; r >= 0; --r) backward += inputs[r][i];
    differing += forward != backward;
  }
  EXPECT_GT(differing, 0);
}

}  // namespace
}  // namespace fission::comm
