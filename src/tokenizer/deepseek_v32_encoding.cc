#include "tokenizer/deepseek_v32_encoding.h"

#include <cstddef>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/json.h"
#include "tokenizer/jinja_value.h"

namespace fission::tokenizer {
namespace dsv32 {
namespace {

using OJson = nlohmann::ordered_json;

constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kUser = "<｜User｜>";
constexpr std::string_view kAssistant = "<｜Assistant｜>";
constexpr std::string_view kDsml = "｜DSML｜";

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

constexpr std::string_view kResponseFormat =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  for (std::size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size()))
    s->replace(at, from.size(), to);
}

// Python's view of a message field: msg.get(key), str(value), truthiness, json.dumps.
const OJson* Field(const OJson& msg, const char* key) {
  auto it = msg.find(key);
  return it == msg.end() ? nullptr : &*it;
}
jinja::Value Py(const OJson* v) { return v ? jinja::Value::FromJson(*v) : jinja::Value::None(); }
std::string Str(const OJson* v) { return Py(v).Str(); }
bool Truthy(const OJson* v) { return v != nullptr && Py(v).Truthy(); }
// `value or ""`, printed.
std::string StrOr(const OJson* v) { return Truthy(v) ? Str(v) : ""; }
std::string ToJson(const OJson& v) { return jinja::Value::FromJson(v).ToJson(); }
std::string Role(const OJson& msg) {
  const OJson* role = Field(msg, "role");
  return role != nullptr && role->is_string() ? role->get<std::string>() : "";
}

std::string Where(std::size_t index) { return StrCat("deepseek_v32 encoding: messages[", index, "]"); }

// A message's tools (OpenAI form) as the JSON of their functions, one per line.
std::string ToolSchemas(const OJson& tools, std::size_t index) {
  if (!tools.is_array()) Fail(Where(index), ": tools must be a list");
  std::string schemas;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const OJson* fn = tools[i].is_object() ? Field(tools[i], "function") : nullptr;
    if (fn == nullptr) Fail(Where(index), ": tools[", i, "] has no function");
    if (i > 0) schemas += '\n';
    schemas += ToJson(*fn);
  }
  return schemas;
}

std::string RenderTools(const std::string& schemas) {
  std::string s(kToolsTemplate);
  ReplaceAll(&s, "{dsml}", kDsml);
  ReplaceAll(&s, "{think_start}", kThinkStart);
  ReplaceAll(&s, "{think_end}", kThinkEnd);
  s.replace(s.find("{schemas}"), 9, schemas);  // last: the schemas' own text is not a template
  return s;
}

struct ToolCall {
  const OJson* name;
  const OJson* arguments;
};

// tool_calls_from_openai_format: every call needs function.name and function.arguments.
std::vector<ToolCall> ToolCallsOf(const OJson& calls, std::size_t index) {
  if (!calls.is_array()) Fail(Where(index), ": tool_calls must be a list");
  std::vector<ToolCall> out;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const OJson* fn = calls[i].is_object() ? Field(calls[i], "function") : nullptr;
    const OJson* name = fn != nullptr && fn->is_object() ? Field(*fn, "name") : nullptr;
    const OJson* arguments = name != nullptr ? Field(*fn, "arguments") : nullptr;
    if (arguments == nullptr) Fail(Where(index), ": tool_calls[", i, "] needs function.name and function.arguments");
    out.push_back({name, arguments});
  }
  return out;
}

// One parameter tag per argument: strings as they are, other values as JSON.
std::string EncodeArguments(const OJson& raw, const std::string& where) {
  OJson parsed;
  const OJson* args = &raw;
  if (raw.is_string()) {
    parsed = ParseOrderedJson(raw.get<std::string>(), where + " arguments");
    args = &parsed;
  }
  if (!args->is_object()) Fail(where, ": the arguments must be a JSON object");
  std::string out;
  for (auto it = args->begin(); it != args->end(); ++it) {
    const bool is_string = it.value().is_string();
    if (it != args->begin()) out += '\n';
    out += StrCat("<", kDsml, "parameter name=\"", it.key(), "\" string=\"", is_string ? "true" : "false", "\">",
                  is_string ? it.value().get<std::string>() : ToJson(it.value()), "</", kDsml, "parameter>");
  }
  return out;
}

std::string EncodeToolCalls(const std::vector<ToolCall>& calls, std::size_t index) {
  std::string invokes;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) invokes += '\n';
    invokes += StrCat("<", kDsml, "invoke name=\"", Str(calls[i].name), "\">\n",
                      EncodeArguments(*calls[i].arguments, StrCat(Where(index), ".tool_calls[", i, "]")), "\n</", kDsml,
                      "invoke>");
  }
  return StrCat("\n\n<", kDsml, "function_calls>\n", invokes, "\n</", kDsml, "function_calls>");
}

// The conversation as render_message sees it.
struct Conversation {
  const OJson& messages;
  std::ptrdiff_t last_user;  // the last user or developer message, or -1
  bool thinking;
};

std::ptrdiff_t LastUserIndex(const OJson& messages) {
  for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(messages.size()) - 1; i >= 0; --i) {
    const std::string role = Role(messages[static_cast<std::size_t>(i)]);
    if (role == "user" || role == "developer") return i;
  }
  return -1;
}

// The thinking tag that closes a user turn or a block of tool results: open for the model to think
// in the current turn, closed otherwise.
std::string_view TurnEnd(bool thinks) { return thinks ? kThinkStart : kThinkEnd; }

std::string SystemExtras(const std::string* schemas, const OJson* response_format) {
  std::string out;
  if (schemas != nullptr) out += "\n\n" + RenderTools(*schemas);
  if (Truthy(response_format)) out += StrCat("\n\n", kResponseFormat, ToJson(*response_format));
  return out;
}

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
  const std::string schemas = Truthy(tools) ? ToolSchemas(*tools, index) : "";
  const std::string* tools_schemas = Truthy(tools) ? &schemas : nullptr;
  const OJson* tool_calls = Field(msg, "tool_calls");
  std::vector<ToolCall> calls;
  if (Truthy(tool_calls)) calls = ToolCallsOf(*tool_calls, index);
  const OJson* response_format = Field(msg, "response_format");
  const bool opens_thinking = static_cast<std::ptrdiff_t>(index) == c.last_user && c.thinking;
  if (role == "system") return StrOr(content) + SystemExtras(tools_schemas, response_format);
  if (role == "developer") {
    if (!Truthy(content)) Fail(Where(index), ": a developer message needs content");
    return StrCat(kUser, SystemExtras(tools_schemas, response_format), "\n\n# The user's message is: ", Str(content),
                  kAssistant, TurnEnd(opens_thinking));
  }
  if (role == "user") return StrCat(kUser, Str(content), kAssistant, TurnEnd(opens_thinking));
  if (role == "tool") return RenderTool(c, index);
  if (role == "assistant") return RenderAssistant(c, index, Truthy(tool_calls) ? &calls : nullptr);
  Fail(Where(index), ": unknown role ", Str(Field(msg, "role")));
}

// drop_thinking_messages: before the last user turn, assistant messages lose their reasoning and
// messages of other roles than user, system and tool disappear.
OJson DropThinking(const OJson& messages) {
  const std::ptrdiff_t last_user = LastUserIndex(messages);
  OJson kept = OJson::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string role = Role(messages[i]);
    if (role == "user" || role == "system" || role == "tool" || static_cast<std::ptrdiff_t>(i) >= last_user) {
      kept.push_back(messages[i]);
    } else if (role == "assistant") {
      OJson copy = messages[i];
      copy.erase("reasoning_content");
      kept.push_back(std::move(copy));
    }
  }
  return kept;
}

// SGLang's request shaping, message by message: content null becomes "", a list of parts its text
// parts joined by spaces; only the fields the encoder reads from a request's message are kept.
OJson RequestMessage(const OJson& m, std::size_t index) {
  if (!m.is_object()) Fail(Where(index), ": a message must be an object");
  OJson out = OJson::object();
  const OJson* role = Field(m, "role");
  out["role"] = role != nullptr ? *role : OJson(nullptr);
  const OJson* content = Field(m, "content");
  if (content == nullptr || content->is_null()) {
    out["content"] = "";
  } else if (content->is_array()) {
    std::string text;
    bool first = true;
    for (const OJson& part : *content) {
      const OJson* type = part.is_object() ? Field(part, "type") : nullptr;
      if (type == nullptr || !(*type == "text" || *type == "input_text") || !part.contains("text")) continue;
      text += StrCat(first ? "" : " ", Str(Field(part, "text")));
      first = false;
    }
    out["content"] = text;
  } else {
    out["content"] = *content;
  }
  for (const char* key : {"reasoning_content", "tool_calls"})
    if (const OJson* v = Field(m, key); v != nullptr && !v->is_null()) out[key] = *v;
  return out;
}

// A tool as SGLang's request model dumps it: the function's description, name, parameters and
// strict, in that order, null (or false) when absent.
OJson RequestTool(const OJson& tool, std::size_t i) {
  const OJson* fn = tool.is_object() ? Field(tool, "function") : nullptr;
  if (fn == nullptr || !fn->is_object()) Fail("deepseek_v32 encoding: tools[", i, "] has no function object");
  auto get = [&](const char* key) { const OJson* v = Field(*fn, key); return v != nullptr ? *v : OJson(nullptr); };
  const OJson* strict = Field(*fn, "strict");
  OJson function = OJson::object();
  function["description"] = get("description");
  function["name"] = get("name");
  function["parameters"] = get("parameters");
  function["strict"] = strict != nullptr && strict->is_boolean() ? *strict : OJson(false);
  const OJson* type = Field(tool, "type");
  OJson out = OJson::object();
  out["type"] = type != nullptr ? *type : OJson("function");
  out["function"] = std::move(function);
  return out;
}

// A final assistant message with text: continued (removed, its text returned to follow the
// encoding) without a generation prompt, otherwise turned into a user turn.
std::string TakeFinalAssistant(OJson* messages, bool add_generation_prompt) {
  if (messages->empty()) return "";
  OJson& last = messages->back();
  if (Role(last) != "assistant" || !last["content"].is_string()) return "";
  std::string text = last["content"].get<std::string>();
  if (add_generation_prompt) {
    OJson user = OJson::object();
    user["role"] = "user";
    user["content"] = std::move(text);
    last = std::move(user);
    return "";
  }
  messages->erase(messages->size() - 1);
  return text;
}

}  // namespace
}  // namespace dsv32

std::string EncodeDeepSeekV32(const nlohmann::ordered_json& messages, const DeepSeekV32Options& options) {
  using dsv32::OJson;
  if (!messages.is_array()) Fail("deepseek_v32 encoding: messages must be a list");
  for (std::size_t i = 0; i < messages.size(); ++i)
    if (!messages[i].is_object()) Fail(dsv32::Where(i), ": a message must be an object");
  OJson dropped;
  const OJson* full = &messages;
  if (options.thinking && options.drop_thinking) {
    dropped = dsv32::DropThinking(messages);
    full = &dropped;
  }
  const dsv32::Conversation c{*full, dsv32::LastUserIndex(*full), options.thinking};
  std::string prompt = options.add_bos_token ? std::string(dsv32::kBos) : "";
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
  using dsv32::OJson;
  if (!messages.is_array()) Fail("deepseek_v32 encoding: messages must be a list");
  OJson shaped = OJson::array();
  for (std::size_t i = 0; i < messages.size(); ++i) shaped.push_back(dsv32::RequestMessage(messages[i], i));
  const std::string continued = dsv32::TakeFinalAssistant(&shaped, options.add_generation_prompt);
  if (shaped.empty()) Fail("deepseek_v32 encoding: no message precedes the assistant message to continue");
  if (dsv32::Role(shaped[0]) != "system") {
    OJson system = OJson::object();
    system["role"] = "system";
    system["content"] = "";
    shaped.insert(shaped.begin(), std::move(system));
  }
  if (options.tools.is_array() && !options.tools.empty()) {
    OJson tools = OJson::array();
    for (std::size_t i = 0; i < options.tools.size(); ++i) tools.push_back(dsv32::RequestTool(options.tools[i], i));
    shaped[0]["tools"] = std::move(tools);
  }
  DeepSeekV32Options encode;
  if (options.extra.is_object()) encode.thinking = dsv32::Truthy(dsv32::Field(options.extra, "thinking"));
  return EncodeDeepSeekV32(shaped, encode) + continued;
}

}  // namespace fission::tokenizer
