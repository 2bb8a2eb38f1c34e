// Helpers of the structured-output tests against `fission serve` on the tool-trained demo model:
// many requests at once, and the check that every constrained output parses and validates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/json.h"
#include "server/serve_process_testlib.h"

namespace fission::server::testing {

// POSTs every body from `threads` clients at once; the replies in the bodies' order.
std::vector<Reply> PostAll(int port, const std::string& path, const std::vector<Json>& bodies, int threads = 16);

// A chat request whose answer must follow PersonSchema, sampled with `seed`.
Json PersonRequest(std::uint64_t seed, bool stream = false);

// Sends `count` PersonRequests at once; returns a line for every answer that is not a 200, does not
// parse, does not validate against PersonSchema or did not finish with "stop" (empty: all good).
std::vector<std::string> PersonFailures(int port, int count, std::uint64_t first_seed);

}  // namespace fission::server::testing
