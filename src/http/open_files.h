// The process's limit on open file descriptors. Every connection is one descriptor, so a server
// or a load-generating client needs more than the usual soft limit of 1024.
#pragma once

#include <cstdint>

namespace fission::http {

// Raises this process's open-file soft limit to its hard limit (bench_serving does the same) and
// returns the soft limit now in force.
std::uint64_t RaiseOpenFileLimit();

}  // namespace fission::http
