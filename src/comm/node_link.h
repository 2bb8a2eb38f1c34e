// Multi-node bootstrap (SGLang's --nnodes, --node-rank, --dist-init-addr, --dist-timeout): the world
// of `tp_size` ranks is split evenly over `nnodes` processes; node 0 (the leader) listens on the
// init address, the followers connect to it and send a handshake that must match the leader's.
// Afterwards the connections carry control frames (follower steps, NCCL ids, shutdown).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/socket.h"

namespace fission::comm {

struct NodeOptions {
  int nnodes = 1;
  int node_rank = 0;
  std::string dist_init_addr;  // HOST:PORT the leader listens on
  double timeout_s = 300;      // --dist-timeout: how long the leader waits and the followers retry
};

// Checks the flags against the world size: node rank in [0, nnodes), nnodes divides tp_size, and
// with more than one node an init address of the form HOST:PORT.
void ValidateNodeOptions(const NodeOptions& options, int world_size);

// The world ranks node `node_rank` hosts: [first, first + count).
struct NodeSpan {
  int first = 0;
  int count = 1;
};
NodeSpan SpanOfNode(int world_size, int nnodes, int node_rank);
int NodeOfRank(int world_rank, int world_size, int nnodes);

// What must agree between the nodes. Fields that are not `compared` only explain a mismatch (the
// model path may differ between hosts; the fingerprint of its config may not).
struct HandshakeField {
  std::string name;
  std::string value;
  bool compared = true;
};
using Handshake = std::vector<HandshakeField>;

// Frame types on the control connections.
enum class ControlMessage : std::uint8_t {
  kHello = 1,    // follower -> leader: node rank and handshake
  kAccept,       // leader -> follower
  kReject,       // leader -> follower: why (the same line the leader fails with)
  kDataAddress,  // follower -> leader: the port of its data listener (CPU communicator)
  kDataTable,    // leader -> followers: every node's data address
  kNcclIds,      // leader -> followers: the NCCL unique id of every group
  kFollowerStep,  // leader -> followers: one step's ForwardBatch (model/runtime/follower_step.h)
  kShutdown,     // leader -> followers: exit 0
};

class NodeLink {
 public:
  // The leader: accepts nnodes - 1 followers on `listener` within `timeout_s`, checks each
  // handshake against its own and answers; a mismatch fails on both sides with the same message.
  static std::unique_ptr<NodeLink> Lead(Socket listener, int nnodes, const Handshake& handshake, double timeout_s);
  // A follower: connects to the leader (retrying for up to `timeout_s`) and sends its handshake.
  static std::unique_ptr<NodeLink> Follow(const HostPort& leader, int node_rank, int nnodes,
                                          const Handshake& handshake, double timeout_s);
  // Lead or Follow, as `options` say.
  static std::unique_ptr<NodeLink> Bootstrap(const NodeOptions& options, const Handshake& handshake);

  int node_rank() const { return node_rank_; }
  int nnodes() const { return nnodes_; }
  bool leader() const { return node_rank_ == 0; }
  // The address the other nodes reach this one at, and the address of node `node` as this one sees
  // it (the leader knows every node; a follower knows the leader).
  const std::string& local_host() const { return local_host_; }
  std::string HostOfNode(int node) const;

  // Leader side.
  void SendToFollowers(ControlMessage type, std::string_view payload);
  std::string ReceiveFromFollower(int node, ControlMessage expected);
  // Follower side. ReceiveFromLeader returns nullopt when the leader closed the connection.
  void SendToLeader(ControlMessage type, std::string_view payload);
  std::optional<Socket::Frame> ReceiveFromLeader();
  std::string ReceiveFromLeader(ControlMessage expected);

 private:
  NodeLink(int node_rank, int nnodes) : node_rank_(node_rank), nnodes_(nnodes) {}
  int node_rank_;
  int nnodes_;
  std::string local_host_;
  Socket leader_;                // a follower's connection to the leader
  std::vector<Socket> followers_;  // the leader's connections, indexed by node rank (0 unused)
};

// The message a handshake mismatch gives on both sides, or "" when `follower` matches `leader`.
std::string HandshakeMismatch(const Handshake& leader, const Handshake& follower, int follower_rank);

}  // namespace fission::comm
