#include "tokenizer/deepseek_v4_encoding.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"
#include "tokenizer/deepseek_encoding_common.h"

namespace fission::tokenizer {
namespace dsv4 {
namespace {

using namespace deepseek;  // NOLINT: the encoders' shared vocabulary

constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";

// The reference's tools system prompt; {dsml}, {think_start}, {think_end} and {schemas} are its
// placeholders.
constexpr std::string_view kToolsTemplate = R"(## Tools

You have access to a set of tools to help answer the user's question. You can invoke tools by writing a "<{dsml}tool_calls>" block like the following:

<{dsml}tool_calls>
<{dsml}invoke name="$TOOL_NAME">
<{dsml}parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE</{dsml}parameter>
...
</{dsml}invoke>
<{dsml}invoke name="$TOOL_NAME2">
...
</{dsml}invoke>
</{dsml}tool_calls>

String parameters should be specified as is and set `string="true"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string="false"`.

If thinking_mode is enabled (triggered by {think_start}), you MUST output your complete reasoning inside {think_start}...{think_end} BEFORE any tool calls or final response.

Otherwise, output directly after {think_end} with tool calls or final response.

### Available Tool Schemas

{schemas}

You MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.
)";

// What reasoning_effort "max" puts before the first message in thinking mode.
constexpr std::string_view kMaxEffort =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root cause, "
    "rigorously stress-testing your logic against all potential paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

// The internal classification tasks and the token each ends with.
constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kTasks{{
    {"action", "<｜action｜>"},
    {"query", "<｜query｜>"},
    {"authority", "<｜authority｜>"},
    {"domain", "<｜domain｜>"},
    {"title", "<｜title｜>"},
    {"read_url", "<｜read_url｜>"},
}};

std::string Where(std::size_t index) { return MessageWhere("deepseek_v4", index); }

// msg.get(key, "") for a field the reference reads with that default.
OJson FieldOr(const OJson& msg, const char* key) {
  const OJson* v = Field(msg, key);
  return v != nullptr ? *v : OJson("");
}

bool HasNonNull(const OJson& msg, const char* key) {
  const OJson* v = Field(msg, key);
  return v != nullptr && !v->is_null();
}

// merge_tool_messages: V4 has no tool turn. A tool result becomes a tool_result block of a user
// message (the one before when that is a user message, a new one otherwise), and a user message
// that follows such blocks joins them as a text block (unless that message carries a task).
OJson MergeToolMessages(const OJson& messages) {
  OJson merged = OJson::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const OJson& msg = messages[i];
    if (!msg.is_object()) Fail(Where(i), ": a message must be an object");
    const OJson* role = Field(msg, "role");
    const bool is_tool = role != nullptr && *role == "tool", is_user = role != nullptr && *role == "user";
    const bool after_blocks = !merged.empty() && Role(merged.back()) == "user" && merged.back().contains("content_blocks");
    if (is_tool) {
      OJson block = {{"type", "tool_result"}, {"tool_use_id", FieldOr(msg, "tool_call_id")}, {"content", FieldOr(msg, "content")}};
      if (after_blocks) {
        merged.back()["content_blocks"].push_back(std::move(block));
      } else {
        merged.push_back({{"role", "user"}, {"content_blocks", OJson::array({std::move(block)})}});
      }
    } else if (is_user) {
      OJson text = {{"type", "text"}, {"text", FieldOr(msg, "content")}};
      if (after_blocks && !HasNonNull(merged.back(), "task")) {
        merged.back()["content_blocks"].push_back(std::move(text));
        continue;
      }
      OJson user = {{"role", "user"}, {"content", FieldOr(msg, "content")}, {"content_blocks", OJson::array({text})}};
      for (const char* key : {"task", "wo_eos", "mask"})
        if (const OJson* v = Field(msg, key)) user[key] = *v;
      merged.push_back(std::move(user));
    } else {
      merged.push_back(msg);
    }
  }
  return merged;
}

// A tool call's id, as the sort reads it: id, else function.id; null when neither is true.
OJson CallId(const OJson& call, std::size_t index) {
  if (!call.is_object()) Fail(Where(index), ": a tool call must be an object");
  if (const OJson* id = Field(call, "id"); Truthy(id)) return *id;
  const OJson* fn = Field(call, "function");
  if (fn == nullptr) return nullptr;
  if (!fn->is_object()) Fail(Where(index), ": a tool call's function must be an object");
  const OJson* id = Field(*fn, "id");
  return Truthy(id) ? *id : OJson(nullptr);
}

// The ids of the last assistant message's calls, each with its position (a repeated id takes the
// last); a result whose id is none of them sorts as the first call.
struct CallOrder {
  std::vector<std::pair<OJson, std::size_t>> ids;
  std::size_t Of(const OJson& id, std::size_t index) const {
    if (id.is_structured()) Fail(Where(index), ": a tool_call_id must be a string or a number");
    for (auto it = ids.rbegin(); it != ids.rend(); ++it)
      if (it->first == id) return it->second;
    return 0;
  }
};

CallOrder OrderOfCalls(const OJson& calls, std::size_t index) {
  if (!calls.is_array()) Fail(Where(index), ": tool_calls must be a list");
  CallOrder order;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    OJson id = CallId(calls[i], index);
    if (id.is_null()) continue;
    if (id.is_structured()) Fail(Where(index), ": a tool call id must be a string or a number");
    order.ids.emplace_back(std::move(id), i);
  }
  return order;
}

// sort_tool_results_by_call_order: a user message's tool_result blocks, in their places among its
// other blocks, take the order of the calls they answer (a stable sort by call position).
void SortToolResults(OJson* messages) {
  CallOrder order;
  for (std::size_t i = 0; i < messages->size(); ++i) {
    OJson& msg = (*messages)[i];
    const std::string role = Role(msg);
    if (role == "assistant" && Truthy(Field(msg, "tool_calls"))) {
      order = OrderOfCalls(msg["tool_calls"], i);
    } else if (role == "user" && Truthy(Field(msg, "content_blocks"))) {
      OJson& blocks = msg["content_blocks"];
      std::vector<OJson> results;
      for (const OJson& b : blocks)
        if (b.is_object() && b.value("type", OJson()) == "tool_result") results.push_back(b);
      if (results.size() < 2 || order.ids.empty()) continue;
      std::stable_sort(results.begin(), results.end(), [&](const OJson& a, const OJson& b) {
        return order.Of(FieldOr(a, "tool_use_id"), i) < order.Of(FieldOr(b, "tool_use_id"), i);
      });
      std::size_t next = 0;
      for (OJson& b : blocks)
        if (b.is_object() && b.value("type", OJson()) == "tool_result") b = results[next++];
    }
  }
}

// The conversation as render_message sees it.
struct Conversation {
  const OJson& messages;
  std::ptrdiff_t last_user;  // the last user or developer message, or -1
  bool thinking;
  bool drop_thinking;  // off when any message carries tools
  bool max_effort;
};

// A text the reference joins: it must be a string (str.join refuses anything else).
std::string JoinedText(const OJson* text, const std::string& where) {
  if (text == nullptr) return "";
  if (!text->is_string()) Fail(where, ": a text part must be a string");
  return text->get<std::string>();
}

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? "\n\n" : "") + parts[i];
  return out;
}

// <tool_result>CONTENT</tool_result>; content given as parts keeps their text, one per paragraph.
std::string ToolResult(const OJson& block, const std::string& where) {
  const OJson content = FieldOr(block, "content");
  if (!content.is_array()) return StrCat("<tool_result>", Str(&content), "</tool_result>");
  std::vector<std::string> parts;
  for (const OJson& part : content) {
    if (!part.is_object()) Fail(where, ": a tool result part must be an object");
    const OJson* type = Field(part, "type");
    parts.push_back(type != nullptr && *type == "text" ? JoinedText(Field(part, "text"), where)
                                                       : StrCat("[Unsupported ", Str(type), "]"));
  }
  return StrCat("<tool_result>", Joined(parts), "</tool_result>");
}

std::string RenderUser(const OJson& msg, std::size_t index) {
  const OJson* blocks = Field(msg, "content_blocks");
  if (!Truthy(blocks)) return StrCat(kUser, StrOr(Field(msg, "content")));
  std::vector<std::string> parts;
  for (const OJson& block : *blocks) {
    const OJson* type = Field(block, "type");
    if (type != nullptr && *type == "text") {
      parts.push_back(JoinedText(Field(block, "text"), Where(index)));
    } else if (type != nullptr && *type == "tool_result") {
      parts.push_back(ToolResult(block, Where(index)));
    } else {
      parts.push_back(StrCat("[Unsupported ", Str(type), "]"));
    }
  }
  return StrCat(kUser, Joined(parts));
}

// encode_arguments_to_dsml: JSON text that parses is its parameters (it must be an object);
// anything else, text that does not parse or a value that is not text, is one "arguments" parameter.
std::string EncodeArguments(const OJson& raw, const std::string& where) {
  OJson args = raw.is_string() ? OJson::parse(raw.get<std::string>(), nullptr, false) : OJson(OJson::value_t::discarded);
  if (args.is_discarded()) args = OJson{{"arguments", raw}};
  if (!args.is_object()) Fail(where, ": the arguments must be a JSON object");
  return DsmlParameters(args);
}

std::string RenderAssistant(const Conversation& c, std::size_t index, const std::vector<ToolCall>* calls) {
  const OJson& msg = c.messages[index];
  std::string calls_text;
  if (calls != nullptr) {
    std::vector<std::string> invokes;
    for (std::size_t i = 0; i < calls->size(); ++i)
      invokes.push_back(DsmlInvoke((*calls)[i].name, EncodeArguments(*(*calls)[i].arguments,
                                                                     StrCat(Where(index), ".tool_calls[", i, "]"))));
    calls_text = DsmlBlock("tool_calls", invokes);
  }
  // The answer to a task shows no thinking.
  const bool answers_task = index > 0 && HasNonNull(c.messages[index - 1], "task");
  std::string reasoning;
  if (c.thinking && !answers_task && (!c.drop_thinking || static_cast<std::ptrdiff_t>(index) > c.last_user))
    reasoning = StrCat(StrOr(Field(msg, "reasoning_content")), kThinkEnd);
  return StrCat(reasoning, StrOr(Field(msg, "content")), calls_text, Truthy(Field(msg, "wo_eos")) ? "" : kEos);
}

std::string RenderBody(const Conversation& c, std::size_t index) {
  const OJson& msg = c.messages[index];
  const std::string role = Role(msg);
  const OJson* content = Field(msg, "content");
  // Tools and tool calls are read (and must be well formed) whatever the role, as the reference does.
  const OJson* tools = Field(msg, "tools");
  const std::string schemas = Truthy(tools) ? ToolSchemas(*tools, Where(index)) : "";
  const OJson* tool_calls = Field(msg, "tool_calls");
  std::vector<ToolCall> calls;
  if (Truthy(tool_calls)) calls = ToolCallsOf(*tool_calls, Where(index));
  const std::string extras = SystemExtras(kToolsTemplate, Truthy(tools) ? &schemas : nullptr, Field(msg, "response_format"));
  if (role == "system") return StrOr(content) + extras;
  if (role == "developer") {
    if (!Truthy(content)) Fail(Where(index), ": a developer message needs content");
    if (!content->is_string()) Fail(Where(index), ": a developer message's content must be text");
    return StrCat(kUser, content->get<std::string>(), extras);
  }
  if (role == "user") return RenderUser(msg, index);
  if (role == "latest_reminder") return StrCat(kLatestReminder, Str(content));
  if (role == "assistant") return RenderAssistant(c, index, Truthy(tool_calls) ? &calls : nullptr);
  Fail(Where(index), ": unknown role ", Str(Field(msg, "role")));
}

std::string_view TaskToken(const OJson& task, std::size_t index) {
  for (const auto& [name, token] : kTasks)
    if (task == name) return token;
  Fail(Where(index), ": invalid task ", Str(&task));
}

// What closes a message the model answers (the last one, or one an assistant or reminder turn
// follows): a task's token, or for a user turn the assistant tag and the thinking tag, open where
// the model thinks (thinking mode, at or after the last user turn unless nothing is dropped).
std::string Transition(const Conversation& c, std::size_t index) {
  if (index + 1 < c.messages.size()) {
    const std::string next = Role(c.messages[index + 1]);
    if (next != "assistant" && next != "latest_reminder") return "";
  }
  const OJson& msg = c.messages[index];
  const std::string_view opened = c.thinking ? kThinkStart : kThinkEnd;
  if (HasNonNull(msg, "task")) {
    const OJson& task = msg["task"];
    const std::string_view token = TaskToken(task, index);
    return task == "action" ? StrCat(kAssistant, opened, token) : std::string(token);
  }
  const std::string role = Role(msg);
  if (role != "user" && role != "developer") return "";
  const bool thinks = c.thinking && (!c.drop_thinking || static_cast<std::ptrdiff_t>(index) >= c.last_user);
  return StrCat(kAssistant, thinks ? kThinkStart : kThinkEnd);
}

std::string RenderMessage(const Conversation& c, std::size_t index) {
  const std::string_view preamble = index == 0 && c.thinking && c.max_effort ? kMaxEffort : "";
  const std::string body = RenderBody(c, index);
  return StrCat(preamble, body, Transition(c, index));
}

bool AnyTools(const OJson& messages) {
  return std::any_of(messages.begin(), messages.end(), [](const OJson& m) { return Truthy(Field(m, "tools")); });
}

// SGLang hands the encoder history tool calls as they came; the encoder reads their arguments as
// JSON text, so an object from the client is given to it as its text.
void ArgumentsAsText(OJson* messages) {
  for (OJson& msg : *messages) {
    OJson* calls = msg.contains("tool_calls") ? &msg["tool_calls"] : nullptr;
    if (calls == nullptr || !calls->is_array()) continue;
    for (OJson& call : *calls) {
      OJson* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
      if (fn != nullptr && fn->is_object() && fn->contains("arguments") && !(*fn)["arguments"].is_string())
        (*fn)["arguments"] = ToJson((*fn)["arguments"]);
    }
  }
}

}  // namespace
}  // namespace dsv4

std::string EncodeDeepSeekV4(const nlohmann::ordered_json& messages, const DeepSeekV4Options& options) {
  using deepseek::OJson;
  if (!messages.is_array()) Fail("deepseek_v4 encoding: messages must be a list");
  OJson merged = dsv4::MergeToolMessages(messages);
  dsv4::SortToolResults(&merged);
  const bool drop = options.drop_thinking && !dsv4::AnyTools(merged);
  const OJson full = options.thinking && drop
                         ? deepseek::DropThinking(merged, {"user", "system", "tool", "latest_reminder",
                                                           "direct_search_results"})
                         : std::move(merged);
  const std::optional<std::string>& effort = options.reasoning_effort;
  // Checked as each message is rendered, so a conversation without messages takes any effort.
  if (!full.empty() && effort && *effort != "max" && *effort != "high")
    Fail("deepseek_v4 encoding: invalid reasoning effort '", *effort, "' (max, high or none)");
  const dsv4::Conversation c{full, deepseek::LastUserIndex(full), options.thinking, drop, effort == "max"};
  std::string prompt = options.add_bos_token ? std::string(deepseek::kBos) : "";
  for (std::size_t i = 0; i < full.size(); ++i) prompt += dsv4::RenderMessage(c, i);
  return prompt;
}

std::string DeepSeekV4Encoding::Apply(const nlohmann::ordered_json& messages, const ChatRenderOptions& options,
                                      const TokenizerConfig& /*config: the encoder writes its own tokens*/) const {
  deepseek::ShapedRequest shaped =
      deepseek::ShapeRequest(messages, options, "deepseek_v4", {"reasoning_content", "tool_calls", "tool_call_id"});
  dsv4::ArgumentsAsText(&shaped.messages);
  DeepSeekV4Options encode;
  if (options.extra.is_object()) {
    encode.thinking = deepseek::Truthy(deepseek::Field(options.extra, "thinking"));
    // SGLang passes "max" and "high" on and drops every other value (OpenAI's default "medium").
    const deepseek::OJson* effort = deepseek::Field(options.extra, "reasoning_effort");
    if (effort != nullptr && (*effort == "max" || *effort == "high")) encode.reasoning_effort = effort->get<std::string>();
  }
  return EncodeDeepSeekV4(shaped.messages, encode) + shaped.continued;
}

}  // namespace fission::tokenizer
