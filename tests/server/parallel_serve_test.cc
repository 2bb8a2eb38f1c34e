// `fission serve` with data-parallel attention and expert parallelism on the tiny checkpoint:
// greedy answers equal a one-rank server's, and /metrics reports each DP group's queue and each
// EP rank's expert load (which sums to the tokens run times top-k times the MoE layers).
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

std::vector<std::string> Args(bool parallel) {
  std::vector<std::string> args = {"--model-path", std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3",
                                   "--tokenizer-path", DemoModelDir(), "--device", "cpu"};
  if (parallel)
    for (const char* a : {"--tp-size", "4", "--enable-dp-attention", "--dp-size", "2", "--ep-size", "4"})
      args.push_back(a);
  return args;
}

// Every sample of `name` (one per label set) in order.
std::vector<double> Samples(const std::string& metrics, const std::string& name) {
  std::istringstream in(metrics);
  std::vector<double> out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(name + "{", 0) == 0) out.push_back(std::stod(line.substr(line.rfind(' ') + 1)));
  return out;
}

constexpr const char* kRequests[] = {
    R"({"input_ids": [5, 77, 300, 12, 409], "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": true}})",
    R"({"input_ids": [9, 8, 7], "sampling_params": {"max_new_tokens": 4, "temperature": 0, "ignore_eos": true}})",
    R"({"input_ids": [100, 200, 300, 400, 500, 1, 2], "sampling_params": {"max_new_tokens": 5, "temperature": 0, "ignore_eos": true}})"};

TEST(ParallelServe, DpAttentionAndExpertParallelAnswerAsOneRankAndReportTheLoad) {
  ServeProcess plain(Args(false));
  std::vector<Json> expected;
  for (const char* request : kRequests) {
    const Reply r = Post(plain.port(), "/generate", request);
    ASSERT_EQ(r.status, 200) << r.body;
    expected.push_back(r.json["output_ids"]);
  }
  EXPECT_EQ(plain.Stop(), 0);

  ServeProcess parallel(Args(true));
  std::int64_t tokens = 0;
  for (std::size_t i = 0; i < std::size(kRequests); ++i) {
    const Reply r = Post(parallel.port(), "/generate", kRequests[i]);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json["output_ids"], expected[i]) << r.body;
    // The model runs the prompt and every generated token but the last.
    tokens += r.json["meta_info"]["prompt_tokens"].get<std::int64_t>() +
              r.json["meta_info"]["completion_tokens"].get<std::int64_t>() - 1;
  }
  // Stats are published after the step's reports: wait until the last step's are.
  ASSERT_EQ(WaitUntilIdle(parallel.port()), "");
  const std::string metrics = Get(parallel.port(), "/metrics").body;
  const std::vector<double> load = Samples(metrics, "fission:expert_load_total");
  ASSERT_EQ(load.size(), 4u) << metrics;
  double sum = 0;
  for (double l : load) sum += l;
  EXPECT_EQ(sum, static_cast<double>(tokens * 4 * 2)) << "top-k 4, 2 MoE layers";  // tiny-deepseek-v3
  EXPECT_EQ(Samples(metrics, "fission:dp_running_reqs").size(), 2u) << metrics;
  EXPECT_EQ(Samples(metrics, "fission:dp_queue_reqs").size(), 2u) << metrics;
  EXPECT_EQ(parallel.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
