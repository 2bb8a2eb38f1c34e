// The scripted benchmark scenario shared by the bench tests: six requests whose every metric is
// computed by hand in report_test.cc and in tests/fixtures/bench/serving_result_block.txt.
#pragma once

#include <string>
#include <vector>

#include "serving_bench/metrics.h"
#include "testing/mock_openai_server.h"

namespace fission::serving_bench::testing {

constexpr int kScenarioRequests = 6;

// Request i: prompt "req-i", prompt_len 10 * (i + 1).
DatasetRow ScenarioRow(int i);
// 0: 4 chunks at 100/150/200/250 ms, usage 4.   1: chunks at 200/300 ms, usage 5, usage 20 ms later.
// 2: one chunk at 50 ms, usage 1 (one token).   3: HTTP 500.
// 4: a chunk at 80 ms then an error chunk.       5: chunks at 60/90/120 ms, no usage block.
MockReply ScenarioReply(int i);
// The scenario index named by a request body's prompt (any API).
int ScenarioIndex(const Json& body);
// The script for MockOpenAiServer.
MockScript ScenarioScript();

}  // namespace fission::serving_bench::testing
