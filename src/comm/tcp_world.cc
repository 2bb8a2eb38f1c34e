// Collectives as gather-to-hub, combine, send-back. Every collective is the same exchange: each
// member contributes `count` floats; the hub builds one result every member can read its output
// from (the sum, the concatenation or the root's buffer); local members meet at a barrier before
// and after, as in LocalWorld.
#include "comm/tcp_world.h"

#include <barrier>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "base/error.h"
#include "base/json.h"
#include "base/log.h"

namespace fission::comm {

struct TcpWorld::Group {
  struct Peer {
    int node = 0;
    std::vector<int> ranks;  // group ranks hosted there (the hub sees the other nodes; a member, the hub)
    Socket socket;
  };
  Group(int size, std::vector<int> local, bool hub)
      : size(size), local(std::move(local)), hub(hub), barrier(static_cast<std::ptrdiff_t>(this->local.size())),
        slots(size) {}
  int size;
  std::vector<int> local;  // group ranks on this node, ascending
  bool hub;
  std::vector<Peer> peers;
  std::barrier<> barrier;
  std::vector<const float*> slots;
  std::vector<float> result;
};

namespace {

enum class Combine { kSum, kConcat, kRoot };

[[noreturn]] void LostPeer(const std::string& message) {
  Log(LogLevel::kError, "a collective between nodes failed: ", message, "; exiting");
  std::fflush(stderr);
  std::_Exit(1);
}

void SendFloats(Socket& s, const float* data, std::size_t count) {
  s.SendFrame(0, std::string_view(reinterpret_cast<const char*>(data), count * sizeof(float)));
}

void RecvFloats(Socket& s, float* data, std::size_t count) {
  std::optional<Socket::Frame> frame = s.RecvFrame(count * sizeof(float));
  if (!frame) Fail(s.peer(), " closed its connection");
  if (frame->payload.size() != count * sizeof(float))
    Fail(s.peer(), " sent ", frame->payload.size(), " bytes where ", count * sizeof(float), " were due");
  std::memcpy(data, frame->payload.data(), frame->payload.size());
}

class TcpCommunicator final : public Communicator {
 public:
  TcpCommunicator(TcpWorld::Group* group, int rank) : g_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }

  void AllReduceSum(const Tensor& buffer) override {
    const float* result = Exchange(buffer.ptr<float>(), buffer.numel(), Combine::kSum, 0);
    std::memcpy(buffer.data, result, buffer.numel() * sizeof(float));
  }
  void AllGather(const Tensor& in, const Tensor& out) override {
    FISSION_CHECK(out.numel() == in.numel() * size(), "AllGather sizes ", in.numel(), " x ", size(), " vs ",
                  out.numel());
    const float* result = Exchange(in.ptr<float>(), in.numel(), Combine::kConcat, 0);
    std::memcpy(out.data, result, out.numel() * sizeof(float));
  }
  void ReduceScatterSum(const Tensor& in, const Tensor& out) override {
    const std::int64_t chunk = out.numel();
    FISSION_CHECK(in.numel() == chunk * size(), "ReduceScatter sizes");
    const float* result = Exchange(in.ptr<float>(), in.numel(), Combine::kSum, 0);
    std::memcpy(out.data, result + rank_ * chunk, chunk * sizeof(float));
  }
  void Broadcast(const Tensor& buffer, int root) override {
    const float* result = Exchange(buffer.ptr<float>(), buffer.numel(), Combine::kRoot, root);
    if (rank_ != root) std::memcpy(buffer.data, result, buffer.numel() * sizeof(float));
  }
  void Barrier() override {
    Exchange(nullptr, 0, Combine::kSum, 0);
  }
  // Expert parallelism across nodes has not landed (ValidateLoadOptions refuses --ep-size with
  // --nnodes); nothing calls this over TCP.
  void AllToAllV(const Tensor&, std::span<const std::int64_t>, const Tensor&, std::span<const std::int64_t>) override {
    Fail("AllToAllV between nodes over TCP has not landed (expert parallelism runs on one node)");
  }

 private:
  // Publishes `in`, lets the node's first member combine, and returns the group's result (valid
  // until the next collective's first barrier, which every member reaches only after reading it).
  const float* Exchange(const float* in, std::int64_t count, Combine op, int root) {
    g_->slots[rank_] = in;
    g_->barrier.arrive_and_wait();
    if (rank_ == g_->local[0]) {
      try {
        if (g_->hub) {
          CombineAtHub(count, op, root);
        } else {
          SendToHub(count, op);
        }
      } catch (const Error& e) {
        LostPeer(e.what());
      }
    }
    g_->barrier.arrive_and_wait();
    return g_->result.data();
  }
  std::size_t ResultSize(std::int64_t count, Combine op) const {
    return static_cast<std::size_t>(op == Combine::kConcat ? count * g_->size : count);
  }

  void CombineAtHub(std::int64_t count, Combine op, int root) {
    const std::size_t n = static_cast<std::size_t>(count);
    std::vector<std::vector<float>> received(g_->peers.size());
    std::vector<const float*> inputs(g_->size, nullptr);
    for (int r : g_->local) inputs[r] = g_->slots[r];
    for (std::size_t p = 0; p < g_->peers.size(); ++p) {
      TcpWorld::Group::Peer& peer = g_->peers[p];
      received[p].resize(n * peer.ranks.size());
      RecvFloats(peer.socket, received[p].data(), received[p].size());
      for (std::size_t k = 0; k < peer.ranks.size(); ++k) inputs[peer.ranks[k]] = received[p].data() + k * n;
    }
    std::vector<float>& result = g_->result;
    result.assign(ResultSize(count, op), 0.0f);
    if (op == Combine::kSum) {
      // The order LocalWorld uses: start from 0 and add members in group-rank order.
      for (std::size_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (int r = 0; r < g_->size; ++r) acc += inputs[r][i];
        result[i] = acc;
      }
    } else if (op == Combine::kConcat) {
      for (int r = 0; r < g_->size; ++r)
        if (n > 0) std::memcpy(result.data() + r * n, inputs[r], n * sizeof(float));
    } else if (n > 0) {
      std::memcpy(result.data(), inputs[root], n * sizeof(float));
    }
    for (TcpWorld::Group::Peer& peer : g_->peers) SendFloats(peer.socket, result.data(), result.size());
  }

  void SendToHub(std::int64_t count, Combine op) {
    const std::size_t n = static_cast<std::size_t>(count);
    std::vector<float> mine(n * g_->local.size());
    for (std::size_t k = 0; k < g_->local.size(); ++k)
      if (n > 0) std::memcpy(mine.data() + k * n, g_->slots[g_->local[k]], n * sizeof(float));
    Socket& hub = g_->peers.at(0).socket;
    SendFloats(hub, mine.data(), mine.size());
    g_->result.resize(ResultSize(count, op));
    RecvFloats(hub, g_->result.data(), g_->result.size());
  }

  TcpWorld::Group* g_;
  int rank_;
};

// Every node's data-listener address, gathered by the leader and sent to every follower.
std::vector<HostPort> ExchangeDataAddresses(NodeLink& link, int own_port) {
  std::vector<HostPort> table(link.nnodes());
  if (link.leader()) {
    table[0] = {link.local_host(), own_port};
    for (int node = 1; node < link.nnodes(); ++node) {
      const std::string port = link.ReceiveFromFollower(node, ControlMessage::kDataAddress);
      table[node] = {link.HostOfNode(node), ParseHostPort("x:" + port, StrCat("node ", node, "'s data port")).port};
    }
    Json out = Json::array();
    for (const HostPort& a : table) out.push_back({a.host, a.port});
    link.SendToFollowers(ControlMessage::kDataTable, out.dump());
    return table;
  }
  link.SendToLeader(ControlMessage::kDataAddress, std::to_string(own_port));
  const std::string where = "the data-address table from the leader";
  const Json in = ParseJson(link.ReceiveFromLeader(ControlMessage::kDataTable), where);
  if (!in.is_array() || static_cast<int>(in.size()) != link.nnodes()) Fail(where, " has the wrong size");
  for (int node = 0; node < link.nnodes(); ++node) {
    const Json& e = in[node];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number_integer())
      Fail(where, " has a malformed entry: ", e.dump());
    table[node] = {e[0].get<std::string>(), e[1].get<int>()};
  }
  table[0].host = link.HostOfNode(0);  // the leader as this node reaches it
  return table;
}

}  // namespace

TcpWorld::TcpWorld(int tp_size, int cp_size, NodeLink& link, double timeout_s) {
  const int nnodes = link.nnodes(), me = link.node_rank();
  span_ = SpanOfNode(tp_size, nnodes, me);
  Layout layout = MakeLayout(tp_size, cp_size);
  groups_ = layout.ranks;

  // The groups in the order every node enumerates them, with the field each one fills.
  std::vector<std::pair<std::vector<int>, Communicator* ProcessGroups::*>> all;
  std::vector<int> world(tp_size);
  for (int r = 0; r < tp_size; ++r) world[r] = r;
  all.push_back({world, &ProcessGroups::world});
  for (const std::vector<int>& m : layout.attn_tp_groups) all.push_back({m, &ProcessGroups::attn_tp});
  for (const std::vector<int>& m : layout.cp_groups) all.push_back({m, &ProcessGroups::cp});

  Socket listener = Listen({link.local_host(), 0}, StrCat("node ", me, "'s data listener"));
  const std::vector<HostPort> table = ExchangeDataAddresses(link, listener.LocalAddress().port);

  std::map<std::pair<int, int>, Group::Peer*> awaited;  // (group, node) -> the hub's slot for it
  for (std::size_t gi = 0; gi < all.size(); ++gi) {
    const std::vector<int>& members = all[gi].first;
    const int n = static_cast<int>(members.size());
    std::map<int, std::vector<int>> by_node;  // node -> group ranks there
    for (int i = 0; i < n; ++i) by_node[NodeOfRank(members[i], tp_size, nnodes)].push_back(i);
    if (!by_node.contains(me)) {
      shared_.push_back(nullptr);
      continue;
    }
    const int hub = NodeOfRank(members[0], tp_size, nnodes);
    auto group = std::make_unique<Group>(n, by_node[me], hub == me);
    for (auto& [node, ranks] : by_node) {
      if (node == me || (hub != me && node != hub)) continue;
      group->peers.push_back({node, ranks, Socket()});
    }
    if (hub != me) {
      Socket& s = group->peers[0].socket;
      s = Connect(table[hub], timeout_s, StrCat("node ", me, ": node ", hub, "'s data listener"));
      s.set_peer(StrCat("node ", hub, " at ", table[hub].ToString()));
      s.SendFrame(0, StrCat(gi, " ", me));
    } else {
      for (Group::Peer& p : group->peers) awaited[{static_cast<int>(gi), p.node}] = &p;
    }
    for (int i : group->local) {
      communicators_.push_back(std::make_unique<TcpCommunicator>(group.get(), i));
      groups_[members[i]].*(all[gi].second) = communicators_.back().get();
    }
    shared_.push_back(std::move(group));
  }
  // Every node has connected to its hubs (the kernel queues connections until accepted), so
  // accepting now cannot wait on a node that is itself waiting.
  for (std::size_t left = awaited.size(); left > 0; --left) {
    Socket s = Accept(listener, timeout_s, StrCat("node ", me, " waiting for data connections"));
    std::optional<Socket::Frame> hello = s.RecvFrame(64);
    int gi = -1, node = -1;
    if (!hello || std::sscanf(hello->payload.c_str(), "%d %d", &gi, &node) != 2 || !awaited.contains({gi, node}) ||
        awaited[{gi, node}]->socket.valid())
      Fail("node ", me, ": an unexpected data connection from ", s.peer());
    s.set_peer(StrCat("node ", node, " at ", s.peer()));
    awaited[{gi, node}]->socket = std::move(s);
  }
}

TcpWorld::~TcpWorld() = default;

const ProcessGroups& TcpWorld::Groups(int world_rank) const {
  FISSION_CHECK(world_rank >= span_.first && world_rank < span_.first + span_.count, "rank ", world_rank,
                " is not on this node");
  return groups_[world_rank];
}

}  // namespace fission::comm
