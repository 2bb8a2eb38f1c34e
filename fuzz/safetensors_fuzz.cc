// Fuzzes the safetensors header parser: any input parses or raises fission::Error.
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    fission::io::ParseSafetensorsHeader(data, size, "fuzz.safetensors");
  } catch (const fission::Error&) {
  }
  return 0;
}
