// What DeepSeek-V3.2's and DeepSeek-V4's chat encoders (deepseek_v32_encoding.h,
// deepseek_v4_encoding.h) have in common. Both references are Python (encoding_dsv32.py,
// encoding_dsv4.py) that read messages with dict.get, print with str() and json.dumps, write tool
// calls as DSML tags, and are called by SGLang after the same request shaping; this is that part,
// once.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_renderer.h"

namespace fission::tokenizer::deepseek {

using OJson = nlohmann::ordered_json;

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kDsml = "｜DSML｜";
inline constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

// Python's view of a message field: msg.get(key) (null when absent), str(value), truthiness,
// `value or ""` printed, json.dumps(value, ensure_ascii=False).
const OJson* Field(const OJson& msg, const char* key);
std::string Str(const OJson* v);
bool Truthy(const OJson* v);
std::string StrOr(const OJson* v);
std::string ToJson(const OJson& v);
// msg.get("role") when it is a string, else "".
std::string Role(const OJson& msg);

// "<encoder> encoding: messages[i]", the start of every refusal about a message.
std::string MessageWhere(std::string_view encoder, std::size_t index);

// The last user or developer message, or -1.
std::ptrdiff_t LastUserIndex(const OJson& messages);

// drop_thinking_messages: before the last user turn, assistant messages lose their reasoning and
// messages of roles other than `keep_roles` disappear; from the last user turn on all stay.
OJson DropThinking(const OJson& messages, std::initializer_list<std::string_view> keep_roles);

// What a system or developer message appends: "\n\n" and the tools block when it has tools
// (`schemas`; `tools_template` is a reference's with its placeholders {dsml}, {think_start},
// {think_end} and {schemas}), "\n\n" and the response format when it has a true one.
std::string SystemExtras(std::string_view tools_template, const std::string* schemas, const OJson* response_format);

// tools_from_openai_format, printed: each tool's function as JSON, one per line. `where` names the
// message in the refusal of a malformed list.
std::string ToolSchemas(const OJson& tools, const std::string& where);

// tool_calls_from_openai_format: every call needs function.name and function.arguments.
struct ToolCall {
  const OJson* name;
  const OJson* arguments;
};
std::vector<ToolCall> ToolCallsOf(const OJson& calls, const std::string& where);

// One parameter tag per key of the object `args`: strings as they are, other values as JSON.
std::string DsmlParameters(const OJson& args);
// <｜DSML｜invoke name="NAME">\nPARAMETERS\n</｜DSML｜invoke>
std::string DsmlInvoke(const OJson* name, const std::string& parameters);
// \n\n<｜DSML｜BLOCK>\nINVOKES (one per line)\n</｜DSML｜BLOCK>: the calls after an assistant's text.
std::string DsmlBlock(std::string_view block, const std::vector<std::string>& invokes);

// SGLang's serving_chat shaping before either encoder: content null becomes "", a list of parts
// its text parts joined by spaces; of a message only role, content and `kept_keys` (when not null)
// stay. A final assistant message with text is continued (removed; its text is `continued`, to
// follow the encoding) without a generation prompt, else turned into a user turn. An empty system
// message goes first when there is none and carries the request's tools, dumped as SGLang's request
// model dumps them.
struct ShapedRequest {
  OJson messages;
  std::string continued;
};
ShapedRequest ShapeRequest(const OJson& messages, const ChatRenderOptions& options, std::string_view encoder,
                           std::initializer_list<const char*> kept_keys);

}  // namespace fission::tokenizer::deepseek
