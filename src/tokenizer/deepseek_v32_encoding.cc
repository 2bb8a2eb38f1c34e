#include "tokenizer/deepseek_v32_encoding.h"

#include <cstddef>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "tokenizer/deepseek_encoding_common.h"

namespace fission::tokenizer {
namespace dsv32 {
namespace {

using namespace deepseek;  // NOLINT: the encoders' shared vocabulary

// The reference's tools system prompt; {dsml}, {think_start}, {think_end} and {schemas} are its
// placeholders.
constexpr std::string_view kToolsTemplate = R"(## Tools
You have access to a set of tools you can use to answer the user's question.
You can invoke functions by writing a "<{dsml}function_calls>" block like the following as part of your reply to the user:
<{dsml}function_calls>
<{dsml}invoke name="$FUNCTION_NAME">
<{dsml}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{dsml}parameter>
...
</{dsml}invoke>
<{dsml}invoke name="$FUNCTION_NAME2">
...
</{dsml}invoke>
</{dsml}function_calls>
String and scalar parameters should be specified as is without any escaping or quotes, while lists and objects should use JSON format. The "string" attribute should be set to "true" for string type parameters and "false" for other types (numbers, booleans, arrays, objects).
If the thinking_mode is enabled, then after function results you should strongly consider outputting a thinking block. Here is an example:
<{dsml}function_calls>
...
</{dsml}function_calls>
<function_results>
...
</function_results>
{think_start}...thinking about results{think_end}
Here are the functions available in JSONSchema format:
<functions>
{schemas}
</functions>
)";

std::string Where(std::size_t index) { return MessageWhere("deepseek_v32", index); }

// The arguments (JSON text or an object) as parameter tags; V3.2 refuses anything but an object.
std::string EncodeArguments(const OJson& raw, const std::string& where) {
  OJson parsed;
  const OJson* args = &raw;
  if (raw.is_string()) {
    parsed = ParseOrderedJson(raw.get<std::string>(), where + " arguments");
    args = &parsed;
  }
  if (!args->is_object()) Fail(where, ": the arguments must be a JSON object");
  return DsmlParameters(*args);
}

std::string EncodeToolCalls(const std::vector<ToolCall>& calls, std::size_t index) {
  std::vector<std::string> invokes;
  for (std::size_t i = 0; i < calls.size(); ++i)
    invokes.push_back(DsmlInvoke(
        calls[i].name, EncodeArguments(*calls[i].arguments, StrCat(Where(index), ".tool_calls[", i, "]"))));
  return DsmlBlock("function_calls", invokes);
}

// The conversation as render_message sees it.
struct Conversation {
  const OJson& messages;
  std::ptrdiff_t last_user;  // the last user or developer message, or -1
  bool thinking;
};

// The thinking tag that closes a user turn or a block of tool results: open for the model to think
// in the current turn, closed otherwise.
std::string_view TurnEnd(bool thinks) { return thinks ? kThinkStart : kThinkEnd; }

std::string RenderTool(const Conversation& c, std::size_t index) {
  const std::ptrdiff_t n = static_cast<std::ptrdiff_t>(c.messages.size());
  // Python indexing: messages[-1] is the last message (a tool result at index 0 looks there).
  auto at = [&](std::ptrdiff_t i) -> const OJson& { return c.messages[static_cast<std::size_t>(i < 0 ? i + n : i)]; };
  const std::ptrdiff_t self = static_cast<std::ptrdiff_t>(index);
  std::ptrdiff_t prev = self - 1;
  const OJson* assistant = &at(prev);
  while (prev >= 0 && Role(*assistant) == "tool") assistant = &at(--prev);
  if (!(index == 0 || (prev >= 0 && Role(*assistant) == "assistant")))
    Fail(Where(index), ": a tool result must follow an assistant message");
  const std::ptrdiff_t order = self - prev;
  const OJson* calls = Field(*assistant, "tool_calls");
  if (!Truthy(calls) || !calls->is_array() || static_cast<std::ptrdiff_t>(calls->size()) < order)
    Fail(Where(index), ": a tool result without a tool call");
  std::string out = order == 1 ? "\n\n<function_results>" : "";
  out += StrCat("\n<result>", Str(Field(at(self), "content")), "</result>");
  if (order == static_cast<std::ptrdiff_t>(calls->size()))
    out += StrCat("\n</function_results>\n\n", TurnEnd(self >= c.last_user && c.thinking));
  return out;
}

std::string RenderAssistant(const Conversation& c, std::size_t index, const std::vector<ToolCall>* calls) {
  const OJson& msg = c.messages[index];
  const std::string calls_text = calls != nullptr ? EncodeToolCalls(*calls, index) : "";
  std::string reasoning;
  if (c.thinking && static_cast<std::ptrdiff_t>(index) > c.last_user) {
    const OJson* reasoning_content = Field(msg, "reasoning_content");
    if (!Truthy(reasoning_content) && calls == nullptr)
      Fail(Where(index), ": in thinking mode an assistant message after the last user message needs "
                         "reasoning_content or tool_calls");
    reasoning = StrCat(StrOr(reasoning_content), kThinkEnd);
  }
  return StrCat(reasoning, StrOr(Field(msg, "content")), calls_text, kEos);
}

std::string RenderMessage(const Conversation& c, std::size_t index) {
  const OJson& msg = c.messages[index];
  const std::string role = Role(msg);
  const OJson* content = Field(msg, "content");
  // Tools and tool calls are read (and must be well formed) whatever the role, as the reference does.
  const OJson* tools = Field(msg, "tools");
  const std::string schemas = Truthy(tools) ? ToolSchemas(*tools, Where(index)) : "";
  const std::string* tools_schemas = Truthy(tools) ? &schemas : nullptr;
  const OJson* tool_calls = Field(msg, "tool_calls");
  std::vector<ToolCall> calls;
  if (Truthy(tool_calls)) calls = ToolCallsOf(*tool_calls, Where(index));
  const std::string extras = SystemExtras(kToolsTemplate, tools_schemas, Field(msg, "response_format"));
  const bool opens_thinking = static_cast<std::ptrdiff_t>(index) == c.last_user && c.thinking;
  if (role == "system") return StrOr(content) + extras;
  if (role == "developer") {
    if (!Truthy(content)) Fail(Where(index), ": a developer message needs content");
    return StrCat(kUser, extras, "\n\n# The user's message is: ", Str(content), kAssistant, TurnEnd(opens_thinking));
  }
  if (role == "user") return StrCat(kUser, Str(content), kAssistant, TurnEnd(opens_thinking));
  if (role == "tool") return RenderTool(c, index);
  if (role == "assistant") return RenderAssistant(c, index, Truthy(tool_calls) ? &calls : nullptr);
  Fail(Where(index), ": unknown role ", Str(Field(msg, "role")));
}

}  // namespace
}  // namespace dsv32

std::string EncodeDeepSeekV32(const nlohmann::ordered_json& messages, const DeepSeekV32Options& options) {
  using deepseek::OJson;
  if (!messages.is_array()) Fail("deepseek_v32 encoding: messages must be a list");
  for (std::size_t i = 0; i < messages.size(); ++i)
    if (!messages[i].is_object()) Fail(dsv32::Where(i), ": a message must be an object");
  OJson dropped;
  const OJson* full = &messages;
  if (options.thinking && options.drop_thinking) {
    dropped = deepseek::DropThinking(messages, {"user", "system", "tool"});
    full = &dropped;
  }
  const dsv32::Conversation c{*full, deepseek::LastUserIndex(*full), options.thinking};
  std::string prompt = options.add_bos_token ? std::string(deepseek::kBos) : "";
  for (std::size_t i = 0; i < messages.size(); ++i) {
    // The reference renders as many messages as it was given, from the list after dropping.
    if (i >= full->size())
      Fail("deepseek_v32 encoding: in thinking mode a developer message before the last user message is "
           "dropped, which the encoder does not allow");
    prompt += dsv32::RenderMessage(c, i);
  }
  return prompt;
}

std::string DeepSeekV32Encoding::Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                                       const TokenizerConfig& /*config: the encoder writes its own tokens*/) const {
  const deepseek::ShapedRequest shaped =
      deepseek::ShapeRequest(messages, options, "deepseek_v32", {"reasoning_content", "tool_calls"});
  DeepSeekV32Options encode;
  if (options.extra.is_object()) encode.thinking = deepseek::Truthy(deepseek::Field(options.extra, "thinking"));
  return EncodeDeepSeekV32(shaped.messages, encode) + shaped.continued;
}

}  // namespace fission::tokenizer
