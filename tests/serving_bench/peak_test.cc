// The peaks: requests in flight at one instant (at most --max-concurrency), and bench_serving's
// output tokens per one-second bucket.
#include <gtest/gtest.h>

#include "serving_bench/metrics.h"

namespace fission::serving_bench {
namespace {

RequestOutput Done(double start, double latency, int tokens) {
  RequestOutput o;
  o.success = true;
  o.start_time = start;
  o.latency = latency;
  o.ttft = latency / tokens;
  for (int i = 1; i < tokens; ++i) o.itl.push_back(latency / tokens);
  o.usage_output_tokens = tokens;
  return o;
}

TEST(PeakTest, ShortRequestsThroughTwoSlotsPeakAtTwo) {
  // Two slots, each running four 0.25 s requests back to back within the first second: every
  // request overlaps the first one-second bucket (bench_serving's count would say 8), but at most
  // two are ever in flight.
  std::vector<RequestOutput> outs;
  for (int slot = 0; slot < 2; ++slot) {
    for (int k = 0; k < 4; ++k) outs.push_back(Done(0.25 * k, 0.2, 4));
  }
  const BenchmarkMetrics m = CalculateMetrics(outs, 1.0, nullptr, Goodput{});
  EXPECT_EQ(m.max_concurrent_requests, 2);
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 32);  // all 32 tokens land in the first second
  // A slot's next request starting when the previous one ends does not overlap it.
  EXPECT_EQ(CalculateMetrics({Done(0, 0.3, 2), Done(0.3, 0.3, 2), Done(0.6, 0.3, 2)}, 1.0, nullptr, Goodput{})
                .max_concurrent_requests,
            1);
}

TEST(PeakTest, OverlapsAndFailuresCount) {
  std::vector<RequestOutput> outs = {Done(0, 1, 2), Done(0.5, 1, 2), Done(0.9, 0.05, 1), Done(2, 1, 1)};
  RequestOutput failed;
  failed.start_time = 0.1;
  failed.latency = 5;
  outs.push_back(failed);  // failures are not counted
  EXPECT_EQ(CalculateMetrics(outs, 3, nullptr, Goodput{}).max_concurrent_requests, 3);
  EXPECT_EQ(CalculateMetrics({}, 1, nullptr, Goodput{}).max_concurrent_requests, 0);
}

}  // namespace
}  // namespace fission::serving_bench
