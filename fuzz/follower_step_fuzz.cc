// Fuzzes the multi-node follower-step decoder: any input is either a plan whose indices are all in
// bounds or an Error; a crash, a sanitizer report or an accepted plan that re-encodes differently
// is a bug.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/runtime/follower_step.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const fission::model::FollowerStep plan = fission::model::DecodeFollowerStep(bytes);
    if (fission::model::EncodeFollowerStep(plan) != bytes) __builtin_trap();
  } catch (const fission::Error&) {
  }
  return 0;
}
