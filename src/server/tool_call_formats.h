// The per-format streams behind ToolCallParser (internal to the server layer).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "server/tool_call_parser.h"

namespace fission::server {

// DeepSeek-V3 (`fenced`: arguments in a ```json fence) and DeepSeek-V3.1 (bare JSON arguments).
std::unique_ptr<ToolCallStream> NewDeepSeekV3Stream(bool fenced, std::vector<ToolSpec> tools, std::uint64_t seed);
// DeepSeek-V4 DSML invoke blocks (<｜DSML｜tool_calls>) and DeepSeek-V3.2's, the same DSML inside
// <｜DSML｜function_calls>: one state machine.
std::unique_ptr<ToolCallStream> NewDeepSeekV4Stream(std::vector<ToolSpec> tools, std::uint64_t seed);
std::unique_ptr<ToolCallStream> NewDeepSeekV32Stream(std::vector<ToolSpec> tools, std::uint64_t seed);
// GLM-4.5 / GLM-4.7 `<tool_call>NAME<arg_key>..</arg_key><arg_value>..</arg_value></tool_call>`.
std::unique_ptr<ToolCallStream> NewGlmStream(std::vector<ToolSpec> tools, std::uint64_t seed);
// Qwen / Hermes `<tool_call>{"name": .., "arguments": {..}}</tool_call>`.
std::unique_ptr<ToolCallStream> NewQwenStream(std::vector<ToolSpec> tools, std::uint64_t seed);

}  // namespace fission::server
