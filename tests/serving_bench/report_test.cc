// The scripted scenario measured exactly: the mock's own byte stream fed to the measurer with its
// scripted timestamps, through the metrics, to the printed block, every number computed by hand.
#include "serving_bench/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "serving_bench/backend.h"
#include "scenario.h"

namespace fission::serving_bench {
namespace {

using http::Clock;
using testing::ScenarioReply;
using testing::ScenarioRow;

Clock::time_point At(Clock::time_point base, double ms) {
  return base + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
}

// What the client would measure for `reply` if every piece arrived exactly on time.
RequestOutput MeasureScripted(const Backend& backend, const MockReply& reply, const DatasetRow& row, double start_s,
                              bool byte_by_byte) {
  const Clock::time_point sent = Clock::time_point() + std::chrono::hours(1);
  StreamMeasurer m(backend, true, sent, row.prompt_len);
  if (reply.status != 200) {
    m.OnStatus(reply.status);
    m.OnData(R"({"error":{"message":"scripted failure","code":500}})", At(sent, 1));
    RequestOutput out = m.Finish("", At(sent, 1));
    out.start_time = start_s;
    return out;
  }
  m.OnStatus(200);
  RequestOutput out;
  bool finished = false;
  for (const TimedPiece& piece : RenderStream(reply, backend.api, "m")) {
    const Clock::time_point t = At(sent, piece.at_ms);
    if (piece.abort) {
      out = m.Finish("response interrupted: connection reset", t);
      finished = true;
      break;
    }
    if (byte_by_byte) {
      for (char c : piece.bytes) m.OnData(std::string_view(&c, 1), t);
    } else {
      m.OnData(piece.bytes, t);
    }
    if (piece.finish) {
      out = m.Finish("", t);
      finished = true;
    }
  }
  EXPECT_TRUE(finished);
  out.start_time = start_s;
  return out;
}

std::vector<RequestOutput> ScenarioOutputs(const Backend& backend, bool byte_by_byte = false) {
  const double starts[] = {0.0, 0.010, 1.2, 0.5, 0.7, 1.5};
  std::vector<RequestOutput> outs;
  for (int i = 0; i < testing::kScenarioRequests; ++i) {
    outs.push_back(MeasureScripted(backend, ScenarioReply(i), ScenarioRow(i), starts[i], byte_by_byte));
  }
  return outs;
}

std::string ReadFixture(const std::string& name) {
  std::ifstream in(std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/bench/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}

TEST(ScenarioMeasureTest, PerRequestMeasurements) {
  const std::vector<RequestOutput> o = ScenarioOutputs(Backend::Parse("openai"));
  ASSERT_EQ(o.size(), 6u);
  // 0: four one-token chunks.
  EXPECT_TRUE(o[0].success);
  EXPECT_DOUBLE_EQ(o[0].ttft, 0.1);
  EXPECT_DOUBLE_EQ(o[0].latency, 0.25);
  ASSERT_EQ(o[0].itl.size(), 3u);
  for (double g : o[0].itl) EXPECT_DOUBLE_EQ(g, 0.05);
  EXPECT_EQ(o[0].usage_output_tokens, 4);
  EXPECT_EQ(o[0].generated_text, "abcd");
  EXPECT_EQ(o[0].prompt_len, 10);
  // 1: the latency runs to the usage chunk, 20 ms after the last text.
  EXPECT_DOUBLE_EQ(o[1].ttft, 0.2);
  EXPECT_DOUBLE_EQ(o[1].latency, 0.32);
  ASSERT_EQ(o[1].itl.size(), 1u);
  EXPECT_DOUBLE_EQ(o[1].itl[0], 0.1);
  EXPECT_EQ(o[1].usage_output_tokens, 5);
  // 2: one token.
  EXPECT_DOUBLE_EQ(o[2].ttft, 0.05);
  EXPECT_DOUBLE_EQ(o[2].latency, 0.05);
  EXPECT_TRUE(o[2].itl.empty());
  // 3, 4: failures with their reasons.
  EXPECT_FALSE(o[3].success);
  EXPECT_EQ(o[3].error, R"(HTTP 500: {"error":{"message":"scripted failure","code":500}})");
  EXPECT_FALSE(o[4].success);
  EXPECT_EQ(o[4].error, "server error in stream: boom");
  // 5: no usage block.
  EXPECT_TRUE(o[5].success);
  EXPECT_FALSE(o[5].usage_output_tokens.has_value());
  EXPECT_EQ(o[5].token_chunks, 3);
}

TEST(ScenarioMeasureTest, SplittingTheStreamAnywhereChangesNothing) {
  const auto whole = ScenarioOutputs(Backend::Parse("openai"));
  const auto bytes = ScenarioOutputs(Backend::Parse("openai"), /*byte_by_byte=*/true);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i].success, bytes[i].success);
    EXPECT_EQ(whole[i].ttft, bytes[i].ttft);
    EXPECT_EQ(whole[i].latency, bytes[i].latency);
    EXPECT_EQ(whole[i].itl, bytes[i].itl);
    EXPECT_EQ(whole[i].generated_text, bytes[i].generated_text);
  }
}

TEST(ScenarioMeasureTest, ChatAndSglangNativeMeasureTheSame) {
  const auto chat = ScenarioOutputs(Backend::Parse("openai-chat"));
  EXPECT_DOUBLE_EQ(chat[0].ttft, 0.1);  // the empty role chunk at 0 ms is not a token
  EXPECT_EQ(chat[0].itl.size(), 3u);
  EXPECT_EQ(chat[0].generated_text, "abcd");
  EXPECT_EQ(chat[1].usage_output_tokens, 5);
  const auto native = ScenarioOutputs(Backend::Parse("sglang"));
  // /generate: cumulative text; a chunk of k tokens adds k equal gaps.
  EXPECT_EQ(native[1].generated_text, "eefff");
  ASSERT_EQ(native[1].itl.size(), 3u);
  for (double g : native[1].itl) EXPECT_DOUBLE_EQ(g, 0.1 / 3);
  EXPECT_EQ(native[1].usage_output_tokens, 5);
  EXPECT_DOUBLE_EQ(native[1].latency, 0.32);
}

TEST(ScenarioReportTest, PrintedBlockMatchesTheHandWrittenSampleLineByLine) {
  const auto outputs = ScenarioOutputs(Backend::Parse("openai"));
  const BenchmarkMetrics m = CalculateMetrics(outputs, 2.0, nullptr, Goodput{});
  ReportConfig c;
  c.backend = "openai";
  c.request_rate = std::numeric_limits<double>::infinity();
  c.max_concurrency = 8;
  c.duration_s = 2.0;
  const std::vector<std::string> got = Lines(FormatResultBlock(c, m));
  const std::vector<std::string> want = Lines(ReadFixture("serving_result_block.txt"));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "line " << i + 1;
}

TEST(ScenarioReportTest, FailuresGoodputAndPercentileSelection) {
  const auto outputs = ScenarioOutputs(Backend::Parse("openai"));
  Goodput g;
  g.ttft_ms = 150;
  g.tpot_ms = 40;
  const BenchmarkMetrics m = CalculateMetrics(outputs, 2.0, nullptr, g);
  // Good: request 2 (one token: TPOT counts as 0) and 5; 0 misses TPOT (50 ms), 1 misses TTFT.
  EXPECT_EQ(m.good_completed, 2);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(FormatFailures(m),
            "Failed requests:                         2         \n"
            "  1 x HTTP 500: {\"error\":{\"message\":\"scripted failure\",\"code\":500}}\n"
            "  1 x server error in stream: boom\n");
  ReportConfig c;
  c.backend = "vllm";
  c.request_rate = 4;
  c.duration_s = 2.0;
  c.goodput = true;
  c.percentile_metrics = {"ttft", "itl"};
  c.metric_percentiles = {50, 99.9};
  const std::string block = FormatResultBlock(c, m);
  EXPECT_NE(block.find("Traffic request rate:                    4.0       \n"), std::string::npos);
  EXPECT_NE(block.find("Max request concurrency:                 not set   \n"), std::string::npos);
  EXPECT_NE(block.find("Request throughput (req/s):              2.00      \n"
                       "Request goodput (req/s):                 1.00      \n"),
            std::string::npos);
  EXPECT_EQ(block.find("End-to-End Latency"), std::string::npos);
  EXPECT_EQ(block.find("TPOT"), std::string::npos);
  EXPECT_NE(block.find("Median TTFT (ms):                        80.00     \n"
                       "P50 TTFT (ms):                           80.00     \n"
                       "P99.9 TTFT (ms):                         199.70    \n"),
            std::string::npos);
  // ITL P99.9: rank 4.995 of [30, 30, 50, 50, 50, 100] -> 50 + 50 * 0.995.
  EXPECT_NE(block.find("P99.9 ITL (ms):                          99.75     \n"
                       "Max ITL (ms):                            100.00    \n"),
            std::string::npos);
  const Json j = ResultJson(c, m);
  EXPECT_EQ(j["completed"], 4);
  EXPECT_EQ(j["failed"], 2);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["p99_ttft_ms"].get<double>(), 197.0);
  EXPECT_DOUBLE_EQ(j["p99.9_itl_ms"].get<double>(), 99.75);
  EXPECT_DOUBLE_EQ(j["median_e2e_latency_ms"].get<double>(), 185.0);
  EXPECT_DOUBLE_EQ(j["p90_e2e_latency_ms"].get<double>(), 299.0);
  EXPECT_EQ(j["total_output_tokens"], 13);
  EXPECT_EQ(j["max_concurrent_requests"], 2);
  EXPECT_DOUBLE_EQ(j["duration"].get<double>(), 2.0);
}

TEST(ScenarioReportTest, AllFailedPrintsZeros) {
  std::vector<RequestOutput> outs(3);
  for (auto& o : outs) o.error = "HTTP 503";
  const BenchmarkMetrics m = CalculateMetrics(outs, 1.0, nullptr, Goodput{});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 3);
  ReportConfig c;
  c.backend = "openai";
  c.request_rate = std::numeric_limits<double>::infinity();
  c.duration_s = 1.0;
  const std::string block = FormatResultBlock(c, m);
  EXPECT_NE(block.find("Successful requests:                     0         \n"), std::string::npos);
  EXPECT_NE(block.find("Mean TTFT (ms):                          0.00      \n"), std::string::npos);
  EXPECT_EQ(FormatFailures(m), "Failed requests:                         3         \n  3 x HTTP 503\n");
}

TEST(PythonFloatTest, MatchesPythonStr) {
  EXPECT_EQ(PythonFloat(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(PythonFloat(1), "1.0");
  EXPECT_EQ(PythonFloat(2.5), "2.5");
  EXPECT_EQ(PythonFloat(0.1), "0.1");
  EXPECT_EQ(PythonFloat(1e16), "1e+16");
  EXPECT_EQ(PythonFloat(1e-5), "1e-05");
  EXPECT_EQ(PercentileName(99), "P99");
  EXPECT_EQ(PercentileName(99.9), "P99.9");
}

}  // namespace
}  // namespace fission::serving_bench
