// Malformed requests by class, for the abuse test of the default suite and the loopback load of
// the slow tier: every one must get a 4xx JSON error (or, for HTTP framing the parser cannot
// recover from, a 4xx and a closed connection), never a 5xx, a hang or a crash.
#pragma once

#include <random>
#include <string>
#include <vector>

namespace fission::server {

// The classes of bad input the server has been probed with.
enum class Malformed {
  kTruncatedJson,   // a valid body cut short
  kWrongField,      // one field of the wrong type or out of range
  kJunkBytes,       // bytes that are not JSON
  kDeepNesting,     // arrays or objects nested thousands deep, anywhere in the body
  kNumberOverflow,  // numbers beyond double's range
  kHugeInteger,     // integers beyond their field's range (2^32 + k, 2^64)
  kHugeValue,       // a 64 KiB model name, role or key
  kEmptyList,       // empty prompt lists and batches
  kOverLimit,       // prompt + max_tokens beyond the context
  kCount,
};
const char* MalformedName(Malformed kind);

struct MalformedRequest {
  Malformed kind;
  std::string path;  // a generation route
  std::string body;
};

// `count` requests drawn from every class in turn, from `rng`.
std::vector<MalformedRequest> MalformedRequests(std::mt19937_64& rng, int count);
// Whole requests with broken HTTP framing or headers, as raw bytes for one connection.
std::vector<std::string> MalformedFraming();

}  // namespace fission::server
