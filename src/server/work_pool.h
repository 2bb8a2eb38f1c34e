// A few threads for the CPU-heavy part of a request (parsing its body, rendering the chat
// template, tokenizing), so that the HTTP I/O threads only move bytes: a 50 MB prompt keeps one of
// these busy, never /health. Tasks run in the order they were posted.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fission::server {

class WorkPool {
 public:
  explicit WorkPool(int threads);
  // Runs the tasks still queued, then joins the threads.
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Any thread. A task must not throw (the caller catches and answers).
  void Post(std::function<void()> task);

 private:
  void Run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace fission::server
