// Measures the benchmark client's own cost on this host, against servers in the same process
// that add no delay of their own:
//  1. throughput: the real benchmark driver (fission bench's) against the mock OpenAI server
//     streaming --chunks chunks per request with no delay, --concurrency requests in flight;
//  2. timestamp lag: --streams concurrent SSE streams whose server sends a chunk every
//     --interval-ms carrying the steady-clock time just before its send(); the client's arrival
//     stamp minus that time is how late the client stamps a token (loopback delivery plus the
//     client's event-loop delay).
//
//   bench_client_overhead [--requests N] [--concurrency N] [--chunks N] [--streams N]
//                         [--stream-chunks N] [--interval-ms MS] [--client-threads N]
#include <utility>  // before Boost: its 1.74 coroutine header needs std::exchange
#include <algorithm>
#include <boost/asio.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/json.h"
#include "serving_bench/metrics.h"
#include "testing/mock_openai_server.h"
#include "serving_bench/runner.h"
#include "serving_bench/stats.h"
#include "http/client.h"
#include "http/sse.h"

namespace {

using fission::Json;
using fission::http::Clock;

struct Flags {
  int requests = 20000;
  int concurrency = 512;
  int chunks = 16;
  int streams = 512;
  int stream_chunks = 50;
  double interval_ms = 20;
  int client_threads = 1;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const double v = std::atof(argv[i + 1]);
    if (k == "--requests") f.requests = static_cast<int>(v);
    else if (k == "--concurrency") f.concurrency = static_cast<int>(v);
    else if (k == "--chunks") f.chunks = static_cast<int>(v);
    else if (k == "--streams") f.streams = static_cast<int>(v);
    else if (k == "--stream-chunks") f.stream_chunks = static_cast<int>(v);
    else if (k == "--interval-ms") f.interval_ms = v;
    else if (k == "--client-threads") f.client_threads = static_cast<int>(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      std::exit(2);
    }
  }
  return f;
}

double CpuSeconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

void Throughput(const Flags& f) {
  using namespace fission::serving_bench;
  MockOpenAiServer mock([&f](const Json&, ApiKind, int) {
    MockReply r;
    for (int i = 0; i < f.chunks; ++i) r.chunks.push_back({0, "tok"});
    r.completion_tokens = f.chunks;
    return r;
  });
  RunOptions o;
  o.backend = Backend::Parse("openai");
  o.base_url = mock.url();
  o.settings.model = "mock-model";
  o.max_concurrency = f.concurrency;
  o.num_warmups = 1;
  o.client_threads = f.client_threads;
  std::vector<DatasetRow> rows(f.requests, DatasetRow{"hello", 1, f.chunks, {}, {}});
  const double cpu0 = CpuSeconds();
  const RunResult r = RunBenchmark(o, rows);
  const double cpu = CpuSeconds() - cpu0;
  const BenchmarkMetrics m = CalculateMetrics(r.outputs, r.duration_s, nullptr, Goodput{});
  std::printf("throughput: %d requests x %d chunks, %d in flight, %d client thread(s)\n", f.requests, f.chunks,
              f.concurrency, f.client_threads);
  std::printf("  completed %d, failed %d, wall %.3f s, process CPU %.3f s (client and server together)\n",
              m.completed, m.failed, r.duration_s, cpu);
  std::printf("  %.0f requests/s, %.0f streamed chunks/s\n", m.completed / r.duration_s,
              static_cast<double>(m.completed) * f.chunks / r.duration_s);
}

// The server side of the lag measurement is plain blocking sockets on one thread: each chunk is
// stamped immediately before its own send(), so the lag excludes queueing behind other streams'
// writes and measures only delivery plus the client's own delay in stamping.
void Lag(const Flags& f) {
  using namespace fission::http;
  namespace asio = boost::asio;
  asio::io_context ioc;
  asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  const int port = acceptor.local_endpoint().port();
  HttpClient client(ClientOptions{.io_threads = f.client_threads});
  std::vector<double> lags_us, first_lags_us;
  std::mutex lag_mu;
  std::atomic<int> done{0};
  for (int s = 0; s < f.streams; ++s) {
    auto splitter = std::make_shared<LineSplitter>();
    auto seen = std::make_shared<int>(0);
    ResponseHandlers h;
    h.on_data = [&, splitter, seen](std::string_view data, Clock::time_point when) {
      std::vector<double> local;
      splitter->Feed(data, [&](std::string_view line) {
        auto payload = SseData(line);
        if (!payload || *payload == "[DONE]") return;
        const long long sent_ns = std::atoll(std::string(*payload).c_str());
        const long long now_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
        const double lag = (now_ns - sent_ns) / 1000.0;
        std::lock_guard lock(lag_mu);
        ((*seen)++ == 0 ? first_lags_us : lags_us).push_back(lag);
      });
    };
    h.on_complete = [&](const std::string& error, Clock::time_point) {
      if (!error.empty()) std::fprintf(stderr, "stream failed: %s\n", error.c_str());
      ++done;
    };
    client.Start(ClientRequest::Post(Url::Parse("http://127.0.0.1:" + std::to_string(port)), "/stream", "{}"), h);
  }
  std::vector<asio::ip::tcp::socket> sockets;
  for (int s = 0; s < f.streams; ++s) {
    asio::ip::tcp::socket socket(ioc);
    acceptor.accept(socket);
    socket.set_option(asio::ip::tcp::no_delay(true));
    asio::streambuf request;
    asio::read_until(socket, request, "\r\n\r\n{}");  // the client's request: headers and "{}"
    asio::write(socket, asio::buffer(std::string(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")));
    sockets.push_back(std::move(socket));
  }
  auto chunk = [](const std::string& body) {
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", body.size());
    return size + body + "\r\n";
  };
  const auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(f.interval_ms));
  auto next = Clock::now();
  int slow_sends = 0;
  for (int c = 0; c < f.stream_chunks; ++c) {
    next += interval;
    std::this_thread::sleep_until(next);
    for (auto& socket : sockets) {
      const auto before = Clock::now();
      const long long ns = std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count();
      asio::write(socket, asio::buffer(chunk("data: " + std::to_string(ns) + "\n\n")));
      // A sender descheduled between its stamp and its send() makes a chunk look late on arrival.
      if (Clock::now() - before > std::chrono::microseconds(100)) ++slow_sends;
    }
  }
  for (auto& socket : sockets) asio::write(socket, asio::buffer(chunk("data: [DONE]\n\n") + "0\r\n\r\n"));
  while (done < f.streams) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::printf("timestamp lag: %d streams x %d chunks every %.1f ms (%.0f chunks/s), %d client thread(s)\n",
              f.streams, f.stream_chunks, f.interval_ms, f.streams * 1000.0 / f.interval_ms, f.client_threads);
  std::printf("  sends that took over 100 us from stamp to return (sender-side delay): %d\n", slow_sends);
  for (const auto& [name, values] : {std::pair{"first chunks", &first_lags_us}, std::pair{"later chunks", &lags_us}}) {
    fission::serving_bench::Summary s(*values);
    std::printf("  %s (%zu): lag mean %.1f us, p50 %.1f us, p90 %.1f us, p99 %.1f us, max %.1f us\n", name, s.size(),
                s.mean(), s.median(), s.Percentile(90), s.Percentile(99), s.max());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = ParseFlags(argc, argv);
  Throughput(f);
  Lag(f);
  return 0;
}
