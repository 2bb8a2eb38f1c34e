// Structured outputs under load on the tool-trained demo model: 200 sampled chat requests for the
// nested PersonSchema (objects, arrays, enums, required fields), 16 at a time; every answer must
// parse and validate. FISSION_STRUCTURED_REQUESTS overrides the count.
#include <gtest/gtest.h>

#include <cstdlib>

#include "server/serve_process_testlib.h"
#include "server/structured_outputs_testlib.h"

namespace fission::server {
namespace {

TEST(StructuredOutputsLoad, TwoHundredConstrainedAnswersAllParseAndValidate) {
  const char* env = std::getenv("FISSION_STRUCTURED_REQUESTS");
  const int count = env != nullptr ? std::atoi(env) : 200;
  ServeProcess server({"--model-path", std::string(FISSION_SOURCE_DIR) + "/tests/fixtures/models/demo-tools",
                       "--tool-call-parser", "qwen"});
  const std::vector<std::string> failures = testing::PersonFailures(server.port(), count, 1);
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << count << " failed; the first: " << failures[0];
  EXPECT_EQ(WaitUntilIdle(server.port()), "");
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace fission::server
