// The environment variables of SGLang (and ATOM's and AITER's) that recipes export. The few that
// change what a client sees and mean something here take effect; every other one present is
// named once at start-up as having no effect, so nothing is silently dropped.
//
//   SGLANG_DEFAULT_THINKING=1         chat requests think unless they say otherwise
//                                     (chat_template_kwargs thinking / enable_thinking default true)
//   SGLANG_DSV4_REASONING_EFFORT=E    default chat_template_kwargs reasoning_effort (also the
//   SGLANG_DSV41_REASONING_EFFORT=E   V4.1 spelling)
//   SGLANG_TORCH_PROFILER_DIR=DIR     where /stop_profile writes when the request names no output_dir
#pragma once

#include <string>
#include <vector>

#include "base/json.h"

namespace fission::server {

struct EnvironmentSettings {
  Json chat_template_kwargs = Json::object();  // defaults under each chat request's own
  std::vector<std::string> applied;            // NAME=VALUE of the variables that took effect
  std::vector<std::string> without_effect;     // names of the other SGLANG_/ATOM_/AITER_ variables
};

// Reads `environment` (NAME=VALUE strings, as `environ` holds). A value that is not a boolean for
// a boolean variable is an Error naming the variable.
EnvironmentSettings ReadEnvironment(const std::vector<std::string>& environment);
// The process's own environment.
std::vector<std::string> ProcessEnvironment();

}  // namespace fission::server
