// Requests in flight counted by construction, the API key compared in constant time, and the
// work pool that decodes requests off the network threads.
#include "server/request_tracker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "server/api_key.h"
#include "server/work_pool.h"

namespace fission::server {
namespace {

TEST(RequestTrackerTest, TicketsCountThemselvesAndTheLimitHolds) {
  RequestTracker tracker(2);
  {
    std::optional<RequestTracker::Ticket> a = tracker.Admit();
    std::optional<RequestTracker::Ticket> b = tracker.Admit();
    ASSERT_TRUE(a && b);
    EXPECT_EQ(tracker.in_flight(), 2);
    EXPECT_FALSE(tracker.Admit()) << "the third request is over the limit";
    // Moving a ticket does not count twice, and the moved-from one releases nothing.
    RequestTracker::Ticket moved = std::move(*a);
    a.reset();
    EXPECT_EQ(tracker.in_flight(), 2);
  }
  EXPECT_EQ(tracker.in_flight(), 0) << "every path out of the scope released its ticket";
  EXPECT_TRUE(tracker.WaitIdle(std::chrono::steady_clock::now()));
}

TEST(RequestTrackerTest, AThrownRequestReleasesItsTicket) {
  RequestTracker tracker(1);
  auto handler = [](RequestTracker::Ticket) { throw std::runtime_error("bad request"); };
  for (int i = 0; i < 100; ++i) {
    std::optional<RequestTracker::Ticket> t = tracker.Admit();
    ASSERT_TRUE(t) << "request " << i << " found the slot taken";
    EXPECT_THROW(handler(std::move(*t)), std::runtime_error);
  }
  EXPECT_EQ(tracker.in_flight(), 0);
}

TEST(RequestTrackerTest, CancelAllRefusesLaterJobsAndTicketsMayOutliveTheTracker) {
  std::optional<RequestTracker::Ticket> late;
  {
    RequestTracker tracker(4);
    std::optional<RequestTracker::Ticket> t = tracker.Admit();
    EXPECT_EQ(t->Attach({}, {"rid-1"}), "");
    EXPECT_TRUE(tracker.Find("rid-1", false).empty()) << "an expired job is not returned";
    EXPECT_TRUE(tracker.CancelAll("shutting down").empty());
    late = tracker.Admit();
    EXPECT_EQ(late->Attach({}, {}), "shutting down");
    EXPECT_FALSE(tracker.WaitIdle(std::chrono::steady_clock::now() + std::chrono::milliseconds(10)));
  }
  late.reset();  // after the tracker: no crash, no leak (AddressSanitizer would say)
}

TEST(ApiKeyTest, MatchesOnlyTheExactBearerKey) {
  const std::string right = "Bearer sekret";
  const std::string wrong = "Bearer sekreT", shorter = "Bearer sekre", longer = "Bearer sekret2", basic = "Basic sekret";
  EXPECT_TRUE(ApiKeyMatches(&right, "sekret"));
  for (const std::string* header : {&wrong, &shorter, &longer, &basic}) EXPECT_FALSE(ApiKeyMatches(header, "sekret")) << *header;
  EXPECT_FALSE(ApiKeyMatches(nullptr, "sekret"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("a", ""));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(WorkPoolTest, RunsEveryTaskIncludingThoseQueuedAtDestruction) {
  std::atomic<int> ran{0};
  {
    WorkPool pool(2);
    for (int i = 0; i < 1000; ++i) pool.Post([&ran] { ++ran; });
  }
  EXPECT_EQ(ran, 1000);
}

}  // namespace
}  // namespace fission::server
