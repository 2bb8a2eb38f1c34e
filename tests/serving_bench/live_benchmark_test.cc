// The whole benchmark driver over real HTTP against the scripted mock server. Counts must be
// exact; times can only be bounded below (the mock waits at least the scripted delays).
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "testing/mock_openai_server.h"
#include "serving_bench/report.h"
#include "serving_bench/runner.h"
#include "scenario.h"

namespace fission::serving_bench {
namespace {

std::vector<DatasetRow> ScenarioRows() {
  std::vector<DatasetRow> rows;
  for (int i = 0; i < testing::kScenarioRequests; ++i) rows.push_back(testing::ScenarioRow(i));
  return rows;
}

RunOptions Options(const MockOpenAiServer& mock, const std::string& backend) {
  RunOptions o;
  o.backend = Backend::Parse(backend);
  o.base_url = mock.url();
  o.settings.model = "mock-model";
  o.num_warmups = 0;
  return o;
}

void CheckScenario(const RunResult& r) {
  ASSERT_EQ(r.outputs.size(), 6u);
  const BenchmarkMetrics m = CalculateMetrics(r.outputs, r.duration_s, nullptr, Goodput{});
  EXPECT_EQ(m.completed, 4);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.total_input, 120);
  EXPECT_EQ(m.total_output, 13);
  EXPECT_EQ(m.ttft_ms.size(), 4u);
  EXPECT_EQ(m.tpot_ms.size(), 3u);  // the one-token request has no TPOT
  EXPECT_EQ(r.outputs[3].error.substr(0, 8), "HTTP 500");
  EXPECT_EQ(r.outputs[4].error, "server error in stream: boom");
  // Scripted delays are lower bounds of what the client measures.
  const double ttft_ms[] = {100, 200, 50, 0, 0, 60};
  const double e2e_ms[] = {250, 320, 50, 0, 0, 120};
  for (int i : {0, 1, 2, 5}) {
    EXPECT_GE(r.outputs[i].ttft * 1000 + 1e-6, ttft_ms[i]) << i;
    EXPECT_GE(r.outputs[i].latency * 1000 + 1e-6, e2e_ms[i]) << i;
    EXPECT_GE(r.outputs[i].latency, r.outputs[i].ttft);
    const double itl_sum = std::accumulate(r.outputs[i].itl.begin(), r.outputs[i].itl.end(), 0.0);
    EXPECT_LE(itl_sum, r.outputs[i].latency - r.outputs[i].ttft + 1e-9);
  }
  EXPECT_EQ(r.outputs[0].itl.size(), 3u);
  EXPECT_EQ(r.outputs[5].itl.size(), 2u);
  EXPECT_GE(r.duration_s, 0.32);
}

TEST(LiveBenchmarkTest, CompletionsStreamingScenario) {
  MockOpenAiServer mock(testing::ScenarioScript());
  RunOptions o = Options(mock, "openai");
  const RunResult r = RunBenchmark(o, ScenarioRows());
  CheckScenario(r);
  EXPECT_EQ(r.outputs[0].generated_text, "abcd");
  // The request carried the dataset's output length and asked for usage.
  for (const Json& body : mock.bodies()) {
    EXPECT_EQ(body["max_tokens"], 16);
    EXPECT_EQ(body["stream_options"]["include_usage"], true);
    EXPECT_EQ(body["model"], "mock-model");
  }
}

TEST(LiveBenchmarkTest, ChatAndNativeBackends) {
  MockOpenAiServer mock(testing::ScenarioScript());
  CheckScenario(RunBenchmark(Options(mock, "openai-chat"), ScenarioRows()));
  CheckScenario(RunBenchmark(Options(mock, "sglang"), ScenarioRows()));
  const std::vector<Json> bodies = mock.bodies();
  ASSERT_EQ(bodies.size(), 12u);
  EXPECT_TRUE(bodies[0].contains("messages"));
  EXPECT_EQ(bodies[11]["sampling_params"]["max_new_tokens"], 16);
}

TEST(LiveBenchmarkTest, ConcurrencyLimitHoldsRequestsBack) {
  // Every request takes at least 30 ms; with at most 2 in flight, no request starts while two
  // earlier ones are still running.
  MockOpenAiServer mock([](const Json&, ApiKind, int) {
    MockReply r;
    r.chunks = {{30, "x"}, {1, "y"}};
    r.completion_tokens = 2;
    return r;
  });
  RunOptions o = Options(mock, "openai");
  o.max_concurrency = 2;
  std::vector<DatasetRow> rows(10, DatasetRow{"p", 5, 2, {}, {}});
  const RunResult r = RunBenchmark(o, rows);
  for (const auto& out : r.outputs) EXPECT_TRUE(out.success) << out.error;
  // At any request's start, fewer than 2 earlier requests are still running.
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    int overlapping = 0;
    for (size_t j = 0; j < r.outputs.size(); ++j) {
      if (j == i) continue;
      const auto& a = r.outputs[i];
      const auto& b = r.outputs[j];
      if (b.start_time <= a.start_time && b.start_time + b.latency > a.start_time + 1e-4) ++overlapping;
    }
    EXPECT_LE(overlapping, 1) << i;
  }
  EXPECT_EQ(mock.requests_seen(), 10);
}

TEST(LiveBenchmarkTest, WarmupFailureIsAnError) {
  MockOpenAiServer mock([](const Json&, ApiKind, int) {
    MockReply r;
    r.status = 503;
    return r;
  });
  RunOptions o = Options(mock, "openai");
  o.num_warmups = 2;
  EXPECT_THROW(RunBenchmark(o, {DatasetRow{"p", 1, 1, {}, {}}}), Error);
}

TEST(LiveBenchmarkTest, DroppedConnectionAndNonStreaming) {
  MockOpenAiServer mock([](const Json& body, ApiKind, int) {
    MockReply r;
    r.chunks = {{5, "a"}, {5, "b"}};
    r.completion_tokens = 2;
    r.drop_connection = body["prompt"] == "drop";
    return r;
  });
  RunOptions o = Options(mock, "openai");
  RunResult r = RunBenchmark(o, {DatasetRow{"drop", 1, 2, {}, {}}, DatasetRow{"ok", 1, 2, {}, {}}});
  EXPECT_FALSE(r.outputs[0].success);
  EXPECT_NE(r.outputs[0].error.find("interrupted"), std::string::npos) << r.outputs[0].error;
  EXPECT_TRUE(r.outputs[1].success);
  o.settings.stream = false;
  r = RunBenchmark(o, {DatasetRow{"ok", 1, 2, {}, {}}});
  ASSERT_TRUE(r.outputs[0].success) << r.outputs[0].error;
  EXPECT_EQ(r.outputs[0].generated_text, "ab");
  EXPECT_EQ(r.outputs[0].ttft, r.outputs[0].latency);
  EXPECT_EQ(r.outputs[0].usage_output_tokens, 2);
}

TEST(ArrivalTimesTest, InfiniteRateSendsAllAtOnce) {
  for (double t : ArrivalTimes(5, std::numeric_limits<double>::infinity(), 1.0, 1)) EXPECT_EQ(t, 0);
}

TEST(ArrivalTimesTest, GammaGapsHaveTheRequestedMeanAndAreSeeded) {
  for (double burstiness : {1.0, 0.5, 4.0}) {
    const auto a = ArrivalTimes(20001, 50.0, burstiness, 7);
    EXPECT_EQ(a, ArrivalTimes(20001, 50.0, burstiness, 7));
    EXPECT_NE(a, ArrivalTimes(20001, 50.0, burstiness, 8));
    EXPECT_EQ(a[0], 0);
    for (size_t i = 1; i < a.size(); ++i) EXPECT_GE(a[i], a[i - 1]);
    // Mean gap 1/rate = 20 ms; 20000 gaps pin it within a few percent.
    const double mean_gap = a.back() / 20000.0;
    EXPECT_NEAR(mean_gap, 0.02, 0.02 * 0.05) << burstiness;
    // Variance of a gamma gap: shape * scale^2 = 1 / (rate^2 * burstiness).
    double var = 0;
    for (size_t i = 1; i < a.size(); ++i) var += std::pow(a[i] - a[i - 1] - mean_gap, 2);
    var /= 20000.0;
    EXPECT_NEAR(var, 1.0 / (2500.0 * burstiness), 0.15 / (2500.0 * burstiness)) << burstiness;
  }
  EXPECT_THROW(ArrivalTimes(3, 0.0, 1.0, 1), Error);
  EXPECT_THROW(ArrivalTimes(3, 1.0, 0.0, 1), Error);
}

}  // namespace
}  // namespace fission::serving_bench
