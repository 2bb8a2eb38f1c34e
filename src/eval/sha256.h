// SHA-256 (FIPS 180-4), for the doc, prompt and target hashes lm-eval writes into its sample logs
// (hashlib.sha256(text.encode("utf-8")).hexdigest()).
#pragma once

#include <string>
#include <string_view>

namespace fission::eval {

// The lowercase hex digest of `data`'s bytes.
std::string Sha256Hex(std::string_view data);

}  // namespace fission::eval
