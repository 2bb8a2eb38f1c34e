#include "server/environment.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

extern char** environ;

namespace fission::server {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool ParseBool(const std::string& name, std::string value) {
  std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off" || value.empty()) return false;
  Fail("environment variable ", name, "='", Abbreviate(value), "' is not a boolean (1/0, true/false, yes/no, on/off)");
}

}  // namespace

EnvironmentSettings ReadEnvironment(const std::vector<std::string>& environment) {
  EnvironmentSettings out;
  for (const std::string& entry : environment) {
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq), value = entry.substr(eq + 1);
    if (!StartsWith(name, "SGLANG_") && !StartsWith(name, "ATOM_") && !StartsWith(name, "AITER_")) continue;
    if (name == "SGLANG_DEFAULT_THINKING") {
      const bool thinking = ParseBool(name, value);
      out.chat_template_kwargs["thinking"] = thinking;
      out.chat_template_kwargs["enable_thinking"] = thinking;
    } else if (name == "SGLANG_DSV4_REASONING_EFFORT" || name == "SGLANG_DSV41_REASONING_EFFORT") {
      if (!value.empty()) out.chat_template_kwargs["reasoning_effort"] = value;
    } else if (name != "SGLANG_TORCH_PROFILER_DIR") {
      out.without_effect.push_back(name);
      continue;
    }
    out.applied.push_back(entry);
  }
  std::sort(out.without_effect.begin(), out.without_effect.end());
  return out;
}

std::vector<std::string> ProcessEnvironment() {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) out.emplace_back(*e);
  return out;
}

}  // namespace fission::server
