#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <functional>

#include "base/error.h"

namespace fission::engine {
namespace {

std::string ErrorOf(const std::function<void(SamplingParams&)>& edit) {
  SamplingParams p;
  edit(p);
  try {
    p.Validate(100);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParamsTest, DefaultsAreValid) { EXPECT_EQ(ErrorOf([](SamplingParams&) {}), ""); }

TEST(SamplingParamsTest, EachInvalidValueNamesItsFieldAndRange) {
  struct Case {
    std::function<void(SamplingParams&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {[](SamplingParams& p) { p.temperature = -0.5; }, "temperature must be a finite number >= 0"},
      {[](SamplingParams& p) { p.temperature = std::numeric_limits<double>::quiet_NaN(); }, "temperature"},
      {[](SamplingParams& p) { p.top_p = 0.0; }, "top_p must be in (0, 1]"},
      {[](SamplingParams& p) { p.top_p = 1.5; }, "top_p must be in (0, 1]"},
      {[](SamplingParams& p) { p.top_k = -2; }, "top_k must be -1"},
      {[](SamplingParams& p) { p.min_p = 1.01; }, "min_p must be in [0, 1]"},
      {[](SamplingParams& p) { p.max_new_tokens = -1; }, "max_new_tokens must be >= 0"},
      {[](SamplingParams& p) { p.min_new_tokens = 200; }, "min_new_tokens must be in [0, max_new_tokens=128]"},
      {[](SamplingParams& p) { p.min_new_tokens = -1; }, "min_new_tokens"},
      {[](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop[1] must be a non-empty string"},
      {[](SamplingParams& p) { p.stop_token_ids = {3, 100}; }, "stop_token_ids[1] must be in [0, 100)"},
      {[](SamplingParams& p) { p.n = 0; }, "n must be in [1, 128]"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0; }, "repetition_penalty must be in (0, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = 2.5; }, "frequency_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.presence_penalty = -3; }, "presence_penalty must be in [-2, 2]"},
      {[](SamplingParams& p) { p.logprobs = true; p.top_logprobs = 21; }, "top_logprobs must be in [0, 20]"},
      {[](SamplingParams& p) { p.top_logprobs = 2; }, "top_logprobs must be 0 unless logprobs"},
  };
  for (const Case& c : cases) {
    const std::string message = ErrorOf(c.edit);
    EXPECT_NE(message.find(c.expected), std::string::npos) << "got '" << message << "', wanted '" << c.expected << "'";
  }
}

TEST(SamplingParamsTest, BoundaryValuesAreAccepted) {
  EXPECT_EQ(ErrorOf([](SamplingParams& p) {
              p.temperature = 0;
              p.top_p = 1;
              p.top_k = 0;
              p.min_p = 1;
              p.max_new_tokens = 0;
              p.stop_token_ids = {0, 99};
              p.repetition_penalty = 2;
              p.frequency_penalty = -2;
              p.presence_penalty = 2;
              p.prompt_logprobs = true;
              p.top_logprobs = 20;
            }),
            "");
}

}  // namespace
}  // namespace fission::engine
