// `fission serve` with speculative decoding on the tiny checkpoint's NextN layer: greedy answers
// equal those of a plain server, and the acceptance is where SGLang's clients read it
// (/get_server_info's internal_states, /metrics). The tiny model's vocabulary is smaller than the
// demo tokenizer's, so requests send token ids.
#include <gtest/gtest.h>

#include <string>

#include "server/serve_process_testlib.h"

namespace fission::server {
namespace {

std::vector<std::string> Args(bool speculative) {
  std::vector<std::string> args = {"--model-path", std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/tiny-deepseek-v3",
                                   "--tokenizer-path", DemoModelDir(), "--device", "cpu"};
  if (speculative)
    for (const char* a : {"--speculative-algorithm", "NEXTN", "--speculative-num-steps", "2", "--speculative-eagle-topk",
                          "1", "--speculative-num-draft-tokens", "3"})
      args.push_back(a);
  return args;
}

constexpr const char* kRequest =
    R"({"input_ids": [5, 77, 300, 12, 409], "sampling_params": {"max_new_tokens": 9, "temperature": 0, "ignore_eos": true}})";

TEST(SpeculativeServe, AnswersAsPlainDecodingAndReportsTheAcceptLength) {
  ServeProcess plain(Args(false));
  const Reply expected = Post(plain.port(), "/generate", kRequest);
  ASSERT_EQ(expected.status, 200) << expected.body;
  ASSERT_TRUE(expected.json["output_ids"].is_array()) << expected.body;
  EXPECT_EQ(expected.json["output_ids"].size(), 9u);
  EXPECT_FALSE(Get(plain.port(), "/get_server_info").json["internal_states"][0].contains("avg_spec_accept_length"));
  EXPECT_EQ(plain.Stop(), 0);

  ServeProcess spec(Args(true));
  const Reply got = Post(spec.port(), "/generate", kRequest);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.json["output_ids"], expected.json["output_ids"]) << got.body << "\n" << expected.body;
  const Json info = Get(spec.port(), "/get_server_info").json;
  const double accept = info["internal_states"][0]["avg_spec_accept_length"].get<double>();
  EXPECT_GE(accept, 1.0);
  EXPECT_LE(accept, 3.0);
  const std::string metrics = Get(spec.port(), "/metrics").body;
  EXPECT_DOUBLE_EQ(MetricValue(metrics, "sglang:spec_accept_length"), accept);
  EXPECT_GT(MetricValue(metrics, "fission:spec_verify_runs_total"), 0);
  EXPECT_EQ(spec.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
