#include "server/request_tracker.h"

#include <algorithm>

namespace fission::server {

struct RequestTracker::Ticket::State {
  struct Entry {
    std::weak_ptr<ApiJob> job;
    std::vector<std::string> rids;
  };
  mutable std::mutex mutex;
  mutable std::condition_variable idle;
  std::int64_t limit = 0;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, Entry> live;  // every live ticket, attached or not
  std::string refusal;                  // set by CancelAll
};

RequestTracker::Ticket::Ticket(Ticket&& other) noexcept : state_(std::move(other.state_)), id_(other.id_) {}

RequestTracker::Ticket& RequestTracker::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    id_ = other.id_;
  }
  return *this;
}

RequestTracker::Ticket::~Ticket() { Release(); }

void RequestTracker::Ticket::Release() {
  if (!state_) return;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->live.erase(id_);
  }
  state_->idle.notify_all();
  state_.reset();
}

std::string RequestTracker::Ticket::Attach(std::weak_ptr<ApiJob> job, std::vector<std::string> rids) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->refusal.empty()) return state_->refusal;
  State::Entry& entry = state_->live.at(id_);
  entry.job = std::move(job);
  entry.rids = std::move(rids);
  return "";
}

RequestTracker::RequestTracker(std::int64_t limit) : state_(std::make_shared<Ticket::State>()) {
  state_->limit = limit;
}

std::optional<RequestTracker::Ticket> RequestTracker::Admit() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (static_cast<std::int64_t>(state_->live.size()) >= state_->limit) return std::nullopt;
  const std::uint64_t id = state_->next_id++;
  state_->live.emplace(id, Ticket::State::Entry{});
  return Ticket(state_, id);
}

std::int64_t RequestTracker::in_flight() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return static_cast<std::int64_t>(state_->live.size());
}

std::vector<std::shared_ptr<ApiJob>> RequestTracker::Find(const std::string& rid, bool all) const {
  std::vector<std::shared_ptr<ApiJob>> jobs;
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (const auto& [id, entry] : state_->live)
    if (all || (!rid.empty() && std::find(entry.rids.begin(), entry.rids.end(), rid) != entry.rids.end()))
      if (auto job = entry.job.lock()) jobs.push_back(std::move(job));
  return jobs;
}

std::vector<std::shared_ptr<ApiJob>> RequestTracker::CancelAll(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->refusal = reason;
  }
  return Find("", true);
}

bool RequestTracker::WaitIdle(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  return state_->idle.wait_until(lock, deadline, [this] { return state_->live.empty(); });
}

}  // namespace fission::server
