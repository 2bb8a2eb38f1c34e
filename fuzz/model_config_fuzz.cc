// Fuzzes the config.json parser: any input parses or raises fission::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/json.h"
#include "io/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const fission::Json json = fission::ParseJson(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    fission::io::ParseModelConfig(json, "config.json");
  } catch (const fission::Error&) {
  }
  return 0;
}
