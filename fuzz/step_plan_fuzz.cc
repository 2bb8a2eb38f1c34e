// Fuzzes the multi-node step-plan decoder: any input is either a plan whose indices are all in
// bounds or an Error; a crash, a sanitizer report or an accepted plan that re-encodes differently
// is a bug.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "model/step_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const fission::model::StepPlan plan = fission::model::DecodeStepPlan(bytes);
    if (fission::model::EncodeStepPlan(plan) != bytes) __builtin_trap();
  } catch (const fission::Error&) {
  }
  return 0;
}
