// The API requests the server has accepted and not yet answered, counted by construction: a
// request holds a Ticket from admission until its job is gone, and the count is the number of
// live tickets, so no error path can leak one. The tracker also finds the jobs to cancel (by rid
// for /abort_request, every one at shutdown) and lets shutdown wait until none is left.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fission::server {

class ApiJob;

class RequestTracker {
 public:
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept;
    Ticket& operator=(Ticket&& other) noexcept;
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket();

    // The job answering this request, with its SGLang rids (none, or one per prompt). Returns the
    // reason the tracker refuses new work after CancelAll ("" while it accepts): the job must not
    // start then.
    std::string Attach(std::weak_ptr<ApiJob> job, std::vector<std::string> rids);

   private:
    friend class RequestTracker;
    struct State;
    Ticket(std::shared_ptr<State> state, std::uint64_t id) : state_(std::move(state)), id_(id) {}
    void Release();
    // Shared with the tracker, so a ticket may outlive it (a job destroyed after the server).
    std::shared_ptr<State> state_;
    std::uint64_t id_ = 0;
  };

  // At most `limit` requests in flight.
  explicit RequestTracker(std::int64_t limit);

  // A ticket, or nullopt when `limit` requests are in flight already (the caller answers 503).
  std::optional<Ticket> Admit();
  std::int64_t in_flight() const;
  // The live jobs attached with `rid`, or every live job when `all`.
  std::vector<std::shared_ptr<ApiJob>> Find(const std::string& rid, bool all) const;
  // From now on Attach refuses with `reason`; returns the jobs attached so far, to be cancelled.
  std::vector<std::shared_ptr<ApiJob>> CancelAll(const std::string& reason);
  // Waits until nothing is in flight or `deadline` passes; true when nothing is.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const;

 private:
  std::shared_ptr<Ticket::State> state_;
};

}  // namespace fission::server
