// A regex of the decimal integers in a range, written as JSON writes them (no leading zeros, no
// plus sign, "-" for negatives): JSON schema's minimum and maximum on integers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace fission::grammar {

// Bounds are inclusive; nullopt is unbounded. Error when the range is empty or a bound's
// magnitude exceeds 10^18.
std::string IntegerRangeRegex(std::optional<std::int64_t> lo, std::optional<std::int64_t> hi);

}  // namespace fission::grammar
