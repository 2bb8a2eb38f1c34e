#include "serving_bench/runner.h"

#include <cmath>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "base/error.h"
#include "http/client.h"

namespace fission::serving_bench {

std::vector<double> ArrivalTimes(int n, double rate, double burstiness, std::uint64_t seed) {
  if (!(rate > 0)) Fail("--request-rate must be positive or inf, got ", rate);
  if (!(burstiness > 0)) Fail("--burstiness must be positive, got ", burstiness);
  std::vector<double> times(std::max(n, 0), 0.0);
  if (std::isinf(rate)) return times;
  // Gaps ~ Gamma(shape = burstiness, scale = 1 / (rate * burstiness)): mean 1/rate whatever the
  // burstiness; burstiness 1 makes them exponential (Poisson arrivals).
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  for (int i = 1; i < n; ++i) times[i] = times[i - 1] + gap(rng);
  return times;
}

namespace {

using http::Clock;

class Driver {
 public:
  Driver(const RunOptions& o, http::HttpClient& client) : o_(o), client_(client) {}

  // Starts one request; `done` gets its output (on an I/O thread).
  void Launch(const DatasetRow& row, Clock::time_point bench_start, std::function<void(RequestOutput)> done) {
    http::ClientRequest req =
        http::ClientRequest::Post(o_.base_url, o_.backend.Path(), BuildRequestBody(o_.backend, o_.settings, row));
    req.headers = o_.headers;
    req.timeout = o_.request_timeout;
    const Clock::time_point sent = Clock::now();
    auto m = std::make_shared<StreamMeasurer>(o_.backend, o_.settings.stream, sent, row.prompt_len);
    http::ResponseHandlers h;
    h.on_headers = [m](int status, const std::vector<http::Header>&, Clock::time_point) { m->OnStatus(status); };
    h.on_data = [m](std::string_view data, Clock::time_point t) { m->OnData(data, t); };
    h.on_complete = [m, sent, bench_start, done = std::move(done)](const std::string& error, Clock::time_point t) {
      RequestOutput out = m->Finish(error, t);
      out.start_time = std::chrono::duration<double>(sent - bench_start).count();
      done(std::move(out));
    };
    client_.Start(std::move(req), std::move(h));
  }

 private:
  const RunOptions& o_;
  http::HttpClient& client_;
};

void Warmup(const RunOptions& o, Driver& driver, const DatasetRow& first) {
  if (o.num_warmups <= 0) return;
  DatasetRow row = first;
  row.output_len = std::min<std::int64_t>(row.output_len, 32);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  std::vector<RequestOutput> outs;
  for (int i = 0; i < o.num_warmups; ++i) {
    driver.Launch(row, Clock::now(), [&](RequestOutput out) {
      std::lock_guard lock(mu);
      outs.push_back(std::move(out));
      ++done;
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done == o.num_warmups; });
  for (const RequestOutput& out : outs) {
    if (out.success) return;
  }
  Fail("warm-up failed: every warm-up request to ", o.base_url.ToString(), o.backend.Path(),
       " failed; first error: ", outs.front().error);
}

}  // namespace

RunResult RunBenchmark(const RunOptions& o, const std::vector<DatasetRow>& rows) {
  if (rows.empty()) Fail("the dataset is empty");
  if (o.max_concurrency && *o.max_concurrency <= 0) Fail("--max-concurrency must be positive");
  const std::vector<double> arrivals =
      ArrivalTimes(static_cast<int>(rows.size()), o.request_rate, o.burstiness, o.seed);
  http::HttpClient client(http::ClientOptions{.io_threads = o.client_threads});
  Driver driver(o, client);
  Warmup(o, driver, rows.front());
  if (o.after_warmup) o.after_warmup();

  RunResult result;
  result.outputs.resize(rows.size());
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> waiting;  // arrived, held back by --max-concurrency
  int in_flight = 0;
  size_t completed = 0;
  Clock::time_point last_done;
  const int limit = o.max_concurrency.value_or(std::numeric_limits<int>::max());
  const Clock::time_point start = Clock::now();

  // Completion frees a slot for the next waiting request.
  std::function<void(size_t)> launch = [&](size_t i) {
    driver.Launch(rows[i], start, [&, i](RequestOutput out) {
      std::optional<size_t> next;
      {
        std::lock_guard lock(mu);
        result.outputs[i] = std::move(out);
        ++completed;
        last_done = Clock::now();
        if (!waiting.empty()) {
          next = waiting.front();
          waiting.pop_front();
        } else {
          --in_flight;
        }
        cv.notify_all();  // under the lock: after the last one the waiter returns at once
      }
      if (next) launch(*next);
    });
  };

  std::thread progress;
  bool finished = false;
  if (o.progress) {
    progress = std::thread([&] {
      std::unique_lock lock(mu);
      while (!finished) {
        const int done = static_cast<int>(completed);
        lock.unlock();
        o.progress(done, static_cast<int>(rows.size()));
        lock.lock();
        cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return finished; });
      }
    });
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[i])));
    bool go = false;
    {
      std::lock_guard lock(mu);
      if (in_flight < limit) {
        ++in_flight;
        go = true;
      } else {
        waiting.push_back(i);
      }
    }
    if (go) launch(i);
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return completed == rows.size(); });
    finished = true;
    cv.notify_all();
  }
  if (progress.joinable()) progress.join();
  if (o.progress) o.progress(static_cast<int>(rows.size()), static_cast<int>(rows.size()));
  result.duration_s = std::chrono::duration<double>(last_done - start).count();
  return result;
}

}  // namespace fission::serving_bench
