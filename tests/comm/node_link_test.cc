// The multi-node bootstrap: flag checks, the node split, and the handshake on both sides.
#include "comm/node_link.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "base/error.h"

namespace fission::comm {
namespace {

using ::testing::HasSubstr;

std::string ValidationError(NodeOptions options, int world_size) {
  try {
    ValidateNodeOptions(options, world_size);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NodeOptions, Validation) {
  NodeOptions o;
  EXPECT_EQ(ValidationError(o, 4), "");
  o.nnodes = 2;
  EXPECT_THAT(ValidationError(o, 4), HasSubstr("needs --dist-init-addr"));
  o.dist_init_addr = "127.0.0.1:5000";
  EXPECT_EQ(ValidationError(o, 4), "");
  EXPECT_THAT(ValidationError(o, 3), HasSubstr("--tp-size 3 cannot be split evenly over --nnodes 2"));
  o.node_rank = 2;
  EXPECT_THAT(ValidationError(o, 4), HasSubstr("--node-rank 2 is outside [0, 2)"));
  o.node_rank = 1;
  o.dist_init_addr = "127.0.0.1";
  EXPECT_THAT(ValidationError(o, 4), HasSubstr("--dist-init-addr '127.0.0.1' has no port"));
  o.dist_init_addr = "127.0.0.1:99999";
  EXPECT_THAT(ValidationError(o, 4), HasSubstr("--dist-init-addr"));
  o.dist_init_addr = "127.0.0.1:5000";
  o.timeout_s = 0;
  EXPECT_THAT(ValidationError(o, 4), HasSubstr("--dist-timeout"));
}

TEST(NodeSpan, SplitsTheWorldEvenly) {
  EXPECT_EQ(SpanOfNode(4, 2, 0).first, 0);
  EXPECT_EQ(SpanOfNode(4, 2, 1).first, 2);
  EXPECT_EQ(SpanOfNode(4, 2, 1).count, 2);
  EXPECT_EQ(SpanOfNode(8, 4, 3).first, 6);
  EXPECT_EQ(NodeOfRank(5, 8, 4), 2);
  EXPECT_EQ(NodeOfRank(3, 4, 2), 1);
}

Handshake Fields(const std::string& tp, const std::string& path = "/models/a") {
  return {{"protocol", "1"}, {"--tp-size", tp}, {"--dtype", "auto"}, {"model path", path, /*compared=*/false}};
}

TEST(Handshake, MismatchNamesBothValues) {
  EXPECT_EQ(HandshakeMismatch(Fields("2"), Fields("2", "/elsewhere"), 1), "");
  const std::string m = HandshakeMismatch(Fields("2"), Fields("4", "/other"), 1);
  EXPECT_THAT(m, HasSubstr("--tp-size is '4' on node 1 but '2' on node 0"));
  EXPECT_THAT(m, HasSubstr("model path: '/other' on node 1, '/models/a' on node 0"));
  Handshake extra = Fields("2");
  extra.push_back({"--attn-cp-size", "2"});
  EXPECT_THAT(HandshakeMismatch(Fields("2"), extra, 3), HasSubstr("node 3 sends --attn-cp-size '2'"));
  EXPECT_THAT(HandshakeMismatch(extra, Fields("2"), 3), HasSubstr("--attn-cp-size is '(not sent)'"));
}

// Runs the leader on a free port in a thread; returns its result (or error) through a future.
struct Leader {
  Leader(int nnodes, Handshake handshake, double timeout_s = 5) {
    Socket listener = Listen({"127.0.0.1", 0}, "test");
    port = listener.LocalAddress().port;
    result = std::async(std::launch::async, [=, l = std::move(listener)]() mutable {
      return NodeLink::Lead(std::move(l), nnodes, handshake, timeout_s);
    });
  }
  HostPort address() const { return {"127.0.0.1", port}; }
  int port = 0;
  std::future<std::unique_ptr<NodeLink>> result;
};

std::string FollowError(const HostPort& leader, int rank, int nnodes, const Handshake& h) {
  try {
    NodeLink::Follow(leader, rank, nnodes, h, 5);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(NodeLink, MismatchFailsOnBothSidesWithTheSameMessage) {
  Leader leader(2, Fields("2"));
  const std::string follower_error = FollowError(leader.address(), 1, 2, Fields("4"));
  EXPECT_THAT(follower_error, HasSubstr("--tp-size is '4' on node 1 but '2' on node 0"));
  try {
    leader.result.get();
    FAIL() << "the leader accepted a mismatching follower";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), follower_error);
  }
}

TEST(NodeLink, RejectsADuplicateNodeRank) {
  Leader leader(3, Fields("2"));
  auto first = std::async(std::launch::async, [&] { return NodeLink::Follow(leader.address(), 1, 3, Fields("2"), 5); });
  ASSERT_NE(first.get(), nullptr);
  EXPECT_THAT(FollowError(leader.address(), 1, 3, Fields("2")), HasSubstr("two followers claim --node-rank 1"));
  EXPECT_THROW(leader.result.get(), Error);
}

TEST(NodeLink, LeaderTimesOutWithoutFollowers) {
  Leader leader(2, Fields("2"), 0.3);
  try {
    leader.result.get();
    FAIL() << "no follower joined, yet the leader returned";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("for 1 follower(s) (0 joined; --dist-timeout): nobody connected within 0.3 s"));
  }
}

TEST(NodeLink, ASilentConnectionCannotStallTheLeader) {
  Leader leader(2, Fields("2"), 0.5);
  Socket silent = Connect(leader.address(), 5, "test");  // connects, then never says hello
  const auto start = std::chrono::steady_clock::now();
  try {
    leader.result.get();
    FAIL() << "the leader admitted a connection that sent nothing";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("a connection to --dist-init-addr from 127.0.0.1:"));
    EXPECT_THAT(e.what(), HasSubstr("sent nothing within"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(NodeLink, AFollowerGivesUpOnALeaderThatNeverAnswers) {
  Socket listener = Listen({"127.0.0.1", 0}, "test");  // accepts (the kernel does), never answers
  const HostPort address{"127.0.0.1", listener.LocalAddress().port};
  try {
    NodeLink::Follow(address, 1, 2, Fields("2"), 0.5);
    FAIL() << "the follower went on without an answer";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("sent nothing within"));
  }
}

TEST(NodeLink, CarriesFramesBothWays) {
  Leader leader(3, Fields("2"));
  auto f1 = std::async(std::launch::async, [&] { return NodeLink::Follow(leader.address(), 1, 3, Fields("2"), 5); });
  auto f2 = std::async(std::launch::async, [&] { return NodeLink::Follow(leader.address(), 2, 3, Fields("2"), 5); });
  std::unique_ptr<NodeLink> l = leader.result.get(), a = f1.get(), b = f2.get();
  EXPECT_TRUE(l->leader());
  EXPECT_EQ(b->node_rank(), 2);
  l->SendToFollowers(ControlMessage::kFollowerStep, "plan");
  EXPECT_EQ(a->ReceiveFromLeader(ControlMessage::kFollowerStep), "plan");
  EXPECT_EQ(b->ReceiveFromLeader(ControlMessage::kFollowerStep), "plan");
  b->SendToLeader(ControlMessage::kDataAddress, "123");
  EXPECT_EQ(l->ReceiveFromFollower(2, ControlMessage::kDataAddress), "123");
  EXPECT_EQ(l->HostOfNode(1), "127.0.0.1");
  EXPECT_EQ(a->HostOfNode(0), "127.0.0.1");
  // Unexpected message types and a closed leader are Errors / end of stream.
  l->SendToFollowers(ControlMessage::kShutdown, "");
  EXPECT_THROW(a->ReceiveFromLeader(ControlMessage::kFollowerStep), Error);
  l.reset();
  EXPECT_EQ(b->ReceiveFromLeader()->type, static_cast<std::uint8_t>(ControlMessage::kShutdown));
  EXPECT_FALSE(b->ReceiveFromLeader().has_value());
}

}  // namespace
}  // namespace fission::comm
