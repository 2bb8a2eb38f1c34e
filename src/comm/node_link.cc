#include "comm/node_link.h"

#include <chrono>
#include <set>

#include "base/error.h"
#include "base/json.h"
#include "base/log.h"

namespace fission::comm {
namespace {

constexpr const char* kInitFlag = "--dist-init-addr";

std::string EncodeHello(int node_rank, const Handshake& handshake) {
  Json fields = Json::array();
  for (const HandshakeField& f : handshake) fields.push_back({f.name, f.value, f.compared});
  return Json{{"node_rank", node_rank}, {"fields", fields}}.dump();
}

// A follower's hello; an Error names the sender when it is not one.
std::pair<int, Handshake> DecodeHello(const std::string& payload, const std::string& from) {
  const std::string where = StrCat("the handshake from ", from);
  Json hello;
  try {
    hello = Json::parse(payload);
  } catch (const Json::exception&) {
    Fail(where, " is not JSON (is another program connecting to ", kInitFlag, "?)");
  }
  if (!hello.is_object() || !hello.contains("fields") || !hello["fields"].is_array())
    Fail(where, " has no fields");
  const int rank = static_cast<int>(GetInt(hello, "node_rank", where));
  Handshake handshake;
  for (const Json& f : hello["fields"]) {
    if (!f.is_array() || f.size() != 3 || !f[0].is_string() || !f[1].is_string() || !f[2].is_boolean())
      Fail(where, " has a malformed field: ", f.dump());
    handshake.push_back({f[0].get<std::string>(), f[1].get<std::string>(), f[2].get<bool>()});
  }
  return {rank, handshake};
}

const HandshakeField* FindField(const Handshake& handshake, const std::string& name) {
  for (const HandshakeField& f : handshake)
    if (f.name == name) return &f;
  return nullptr;
}

// Accepts one follower, reads its hello and answers. Returns its rank; fails (after telling the
// follower why) on a mismatch.
int AdmitFollower(Socket& follower, int nnodes, const Handshake& handshake, std::set<int>& seen,
                  double timeout_s) {
  const std::string from = follower.peer();
  follower.set_peer(StrCat("a connection to ", kInitFlag, " from ", from));
  follower.SetReceiveTimeout(timeout_s);  // a peer that connects and says nothing must not stall node 0
  const std::optional<Socket::Frame> frame = follower.RecvFrame(1 << 20);
  follower.SetReceiveTimeout(0);
  if (!frame || frame->type != static_cast<std::uint8_t>(ControlMessage::kHello))
    Fail(follower.peer(), " sent no handshake");
  auto [rank, theirs] = DecodeHello(frame->payload, from);
  std::string problem;
  if (rank < 1 || rank >= nnodes) {
    problem = StrCat("a follower at ", from, " has --node-rank ", rank, ", outside [1, ", nnodes,
                     ") for --nnodes ", nnodes, " on node 0");
  } else if (seen.contains(rank)) {
    problem = StrCat("two followers claim --node-rank ", rank, " (the second at ", from, ")");
  } else {
    problem = HandshakeMismatch(handshake, theirs, rank);
  }
  if (!problem.empty()) {
    follower.SendFrame(static_cast<std::uint8_t>(ControlMessage::kReject), problem);
    Fail(problem);
  }
  follower.SendFrame(static_cast<std::uint8_t>(ControlMessage::kAccept), "");
  follower.set_peer(StrCat("node ", rank, " at ", from));
  seen.insert(rank);
  return rank;
}

}  // namespace

void ValidateNodeOptions(const NodeOptions& options, int world_size) {
  if (options.nnodes < 1) Fail("--nnodes must be at least 1, got ", options.nnodes);
  if (options.node_rank < 0 || options.node_rank >= options.nnodes)
    Fail("--node-rank ", options.node_rank, " is outside [0, ", options.nnodes, ") for --nnodes ", options.nnodes);
  if (!(options.timeout_s > 0)) Fail("--dist-timeout must be positive, got ", options.timeout_s);
  if (options.nnodes == 1) return;
  if (world_size % options.nnodes != 0)
    Fail("--tp-size ", world_size, " cannot be split evenly over --nnodes ", options.nnodes,
         " (each node hosts tp-size / nnodes ranks)");
  if (options.dist_init_addr.empty())
    Fail("--nnodes ", options.nnodes, " needs --dist-init-addr HOST:PORT (where node 0 listens)");
  ParseHostPort(options.dist_init_addr, kInitFlag);
}

NodeSpan SpanOfNode(int world_size, int nnodes, int node_rank) {
  FISSION_CHECK(nnodes >= 1 && world_size % nnodes == 0 && node_rank >= 0 && node_rank < nnodes);
  const int per_node = world_size / nnodes;
  return {node_rank * per_node, per_node};
}

int NodeOfRank(int world_rank, int world_size, int nnodes) { return world_rank / (world_size / nnodes); }

std::string HandshakeMismatch(const Handshake& leader, const Handshake& follower, int follower_rank) {
  auto context = [&] {
    std::string text;
    for (const HandshakeField& f : leader) {
      if (f.compared) continue;
      const HandshakeField* theirs = FindField(follower, f.name);
      text += StrCat("; ", f.name, ": '", theirs ? theirs->value : "(none)", "' on node ", follower_rank, ", '",
                     f.value, "' on node 0");
    }
    return text;
  };
  for (const HandshakeField& f : leader) {
    if (!f.compared) continue;
    const HandshakeField* theirs = FindField(follower, f.name);
    const std::string value = theirs ? theirs->value : "(not sent)";
    if (value != f.value)
      return StrCat("node ", follower_rank, " does not match node 0 (the leader): ", f.name, " is '", value,
                    "' on node ", follower_rank, " but '", f.value, "' on node 0", context());
  }
  for (const HandshakeField& f : follower)
    if (f.compared && !FindField(leader, f.name))
      return StrCat("node ", follower_rank, " sends ", f.name, " '", f.value, "', which node 0 (the leader) lacks",
                    context());
  return "";
}

std::unique_ptr<NodeLink> NodeLink::Lead(Socket listener, int nnodes, const Handshake& handshake, double timeout_s) {
  std::unique_ptr<NodeLink> link(new NodeLink(0, nnodes));
  link->local_host_ = listener.LocalAddress().host;
  link->followers_.resize(nnodes);
  std::set<int> seen;
  const std::string what = StrCat("node 0 waiting on ", kInitFlag, " ", listener.LocalAddress().ToString(), " for ",
                                  nnodes - 1, " follower(s)");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (static_cast<int>(seen.size()) < nnodes - 1) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      Fail(what, ": only ", seen.size(), " joined within ", timeout_s, " s (--dist-timeout)");
    Socket follower =
        Accept(listener, left, StrCat(what, " (", seen.size(), " joined; --dist-timeout)"), timeout_s);
    const int rank = AdmitFollower(follower, nnodes, handshake, seen, left);
    link->followers_[rank] = std::move(follower);
  }
  return link;
}

std::unique_ptr<NodeLink> NodeLink::Follow(const HostPort& leader, int node_rank, int nnodes,
                                           const Handshake& handshake, double timeout_s) {
  std::unique_ptr<NodeLink> link(new NodeLink(node_rank, nnodes));
  link->leader_ = Connect(leader, timeout_s, StrCat("node ", node_rank, ": the leader (node 0) at ", kInitFlag));
  link->leader_.set_peer(StrCat("the leader (node 0) at ", leader.ToString()));
  link->local_host_ = link->leader_.LocalAddress().host;
  link->SendToLeader(ControlMessage::kHello, EncodeHello(node_rank, handshake));
  link->leader_.SetReceiveTimeout(timeout_s);
  const std::optional<Socket::Frame> answer = link->leader_.RecvFrame(1 << 20);
  link->leader_.SetReceiveTimeout(0);
  if (!answer) Fail("the leader (node 0) at ", leader.ToString(), " closed the connection during the handshake");
  if (answer->type == static_cast<std::uint8_t>(ControlMessage::kReject)) Fail(answer->payload);
  if (answer->type != static_cast<std::uint8_t>(ControlMessage::kAccept))
    Fail("the leader (node 0) at ", leader.ToString(), " answered the handshake with message type ",
         int{answer->type});
  return link;
}

std::unique_ptr<NodeLink> NodeLink::Bootstrap(const NodeOptions& options, const Handshake& handshake) {
  const HostPort address = ParseHostPort(options.dist_init_addr, kInitFlag);
  if (options.node_rank == 0) {
    Log(LogLevel::kInfo, "node 0 of ", options.nnodes, ": waiting for followers on ", address.ToString());
    return Lead(Listen(address, kInitFlag), options.nnodes, handshake, options.timeout_s);
  }
  Log(LogLevel::kInfo, "node ", options.node_rank, " of ", options.nnodes, ": joining ", address.ToString());
  return Follow(address, options.node_rank, options.nnodes, handshake, options.timeout_s);
}

std::string NodeLink::HostOfNode(int node) const {
  if (node == node_rank_) return local_host_;
  if (leader()) return followers_.at(node).PeerAddress().host;
  FISSION_CHECK(node == 0, "a follower knows only the leader's address");
  return leader_.PeerAddress().host;
}

void NodeLink::SendToFollowers(ControlMessage type, std::string_view payload) {
  FISSION_CHECK(leader());
  for (int node = 1; node < nnodes_; ++node) followers_[node].SendFrame(static_cast<std::uint8_t>(type), payload);
}

std::string NodeLink::ReceiveFromFollower(int node, ControlMessage expected) {
  FISSION_CHECK(leader() && node >= 1 && node < nnodes_);
  Socket& s = followers_[node];
  std::optional<Socket::Frame> frame = s.RecvFrame();
  if (!frame) Fail(s.peer(), " closed its connection");
  if (frame->type != static_cast<std::uint8_t>(expected))
    Fail(s.peer(), " sent message type ", int{frame->type}, " where ", int{static_cast<std::uint8_t>(expected)},
         " was due");
  return std::move(frame->payload);
}

void NodeLink::SendToLeader(ControlMessage type, std::string_view payload) {
  FISSION_CHECK(!leader());
  leader_.SendFrame(static_cast<std::uint8_t>(type), payload);
}

std::optional<Socket::Frame> NodeLink::ReceiveFromLeader() {
  FISSION_CHECK(!leader());
  return leader_.RecvFrame();
}

std::string NodeLink::ReceiveFromLeader(ControlMessage expected) {
  std::optional<Socket::Frame> frame = ReceiveFromLeader();
  if (!frame) Fail(leader_.peer(), " closed its connection");
  if (frame->type != static_cast<std::uint8_t>(expected))
    Fail(leader_.peer(), " sent message type ", int{frame->type}, " where ",
         int{static_cast<std::uint8_t>(expected)}, " was due");
  return std::move(frame->payload);
}

}  // namespace fission::comm
