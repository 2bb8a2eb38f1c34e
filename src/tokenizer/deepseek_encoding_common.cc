#include "tokenizer/deepseek_encoding_common.h"

#include <algorithm>

#include "base/error.h"
#include "tokenizer/jinja_value.h"

namespace fission::tokenizer::deepseek {
namespace {

// The template interpreter's Python values print as Python does.
jinja::Value Py(const OJson* v) { return v ? jinja::Value::FromJson(*v) : jinja::Value::None(); }

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  for (std::size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size()))
    s->replace(at, from.size(), to);
}

// One message of the request, as SGLang hands it to the encoder.
OJson RequestMessage(const OJson& m, std::string_view encoder, std::size_t index,
                     std::initializer_list<const char*> kept_keys) {
  if (!m.is_object()) Fail(MessageWhere(encoder, index), ": a message must be an object");
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
  for (const char* key : kept_keys)
    if (const OJson* v = Field(m, key); v != nullptr && !v->is_null()) out[key] = *v;
  return out;
}

// A tool as SGLang's request model dumps it: the function's description, name, parameters and
// strict, in that order, null (or false) when absent.
OJson RequestTool(const OJson& tool, std::string_view encoder, std::size_t i) {
  const OJson* fn = tool.is_object() ? Field(tool, "function") : nullptr;
  if (fn == nullptr || !fn->is_object()) Fail(encoder, " encoding: tools[", i, "] has no function object");
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

const OJson* Field(const OJson& msg, const char* key) {
  auto it = msg.find(key);
  return it == msg.end() ? nullptr : &*it;
}
std::string Str(const OJson* v) { return Py(v).Str(); }
bool Truthy(const OJson* v) { return v != nullptr && Py(v).Truthy(); }
std::string StrOr(const OJson* v) { return Truthy(v) ? Str(v) : ""; }
std::string ToJson(const OJson& v) { return jinja::Value::FromJson(v).ToJson(); }
std::string Role(const OJson& msg) {
  const OJson* role = Field(msg, "role");
  return role != nullptr && role->is_string() ? role->get<std::string>() : "";
}

std::string MessageWhere(std::string_view encoder, std::size_t index) {
  return StrCat(encoder, " encoding: messages[", index, "]");
}

std::ptrdiff_t LastUserIndex(const OJson& messages) {
  for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(messages.size()) - 1; i >= 0; --i) {
    const std::string role = Role(messages[static_cast<std::size_t>(i)]);
    if (role == "user" || role == "developer") return i;
  }
  return -1;
}

OJson DropThinking(const OJson& messages, std::initializer_list<std::string_view> keep_roles) {
  const std::ptrdiff_t last_user = LastUserIndex(messages);
  OJson kept = OJson::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const std::string role = Role(messages[i]);
    const bool keep_role = std::find(keep_roles.begin(), keep_roles.end(), role) != keep_roles.end();
    if (keep_role || static_cast<std::ptrdiff_t>(i) >= last_user) {
      kept.push_back(messages[i]);
    } else if (role == "assistant") {
      OJson copy = messages[i];
      copy.erase("reasoning_content");
      kept.push_back(std::move(copy));
    }
  }
  return kept;
}

std::string SystemExtras(std::string_view tools_template, const std::string* schemas, const OJson* response_format) {
  std::string out;
  if (schemas != nullptr) {
    std::string tools(tools_template);
    ReplaceAll(&tools, "{dsml}", kDsml);
    ReplaceAll(&tools, "{think_start}", kThinkStart);
    ReplaceAll(&tools, "{think_end}", kThinkEnd);
    tools.replace(tools.find("{schemas}"), 9, *schemas);  // last: the schemas' own text is not a template
    out += "\n\n" + tools;
  }
  if (Truthy(response_format)) out += StrCat("\n\n", kResponseFormat, ToJson(*response_format));
  return out;
}

std::string ToolSchemas(const OJson& tools, const std::string& where) {
  if (!tools.is_array()) Fail(where, ": tools must be a list");
  std::string schemas;
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const OJson* fn = tools[i].is_object() ? Field(tools[i], "function") : nullptr;
    if (fn == nullptr) Fail(where, ": tools[", i, "] has no function");
    if (i > 0) schemas += '\n';
    schemas += ToJson(*fn);
  }
  return schemas;
}

std::vector<ToolCall> ToolCallsOf(const OJson& calls, const std::string& where) {
  if (!calls.is_array()) Fail(where, ": tool_calls must be a list");
  std::vector<ToolCall> out;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const OJson* fn = calls[i].is_object() ? Field(calls[i], "function") : nullptr;
    const OJson* name = fn != nullptr && fn->is_object() ? Field(*fn, "name") : nullptr;
    const OJson* arguments = name != nullptr ? Field(*fn, "arguments") : nullptr;
    if (arguments == nullptr) Fail(where, ": tool_calls[", i, "] needs function.name and function.arguments");
    out.push_back({name, arguments});
  }
  return out;
}

std::string DsmlParameters(const OJson& args) {
  std::string out;
  for (auto it = args.begin(); it != args.end(); ++it) {
    const bool is_string = it.value().is_string();
    if (it != args.begin()) out += '\n';
    out += StrCat("<", kDsml, "parameter name=\"", it.key(), "\" string=\"", is_string ? "true" : "false", "\">",
                  is_string ? it.value().get<std::string>() : ToJson(it.value()), "</", kDsml, "parameter>");
  }
  return out;
}

std::string DsmlInvoke(const OJson* name, const std::string& parameters) {
  return StrCat("<", kDsml, "invoke name=\"", Str(name), "\">\n", parameters, "\n</", kDsml, "invoke>");
}

std::string DsmlBlock(std::string_view block, const std::vector<std::string>& invokes) {
  std::string joined;
  for (std::size_t i = 0; i < invokes.size(); ++i) joined += (i > 0 ? "\n" : "") + invokes[i];
  return StrCat("\n\n<", kDsml, block, ">\n", joined, "\n</", kDsml, block, ">");
}

ShapedRequest ShapeRequest(const OJson& messages, const ChatRenderOptions& options, std::string_view encoder,
                           std::initializer_list<const char*> kept_keys) {
  if (!messages.is_array()) Fail(encoder, " encoding: messages must be a list");
  ShapedRequest out{OJson::array(), ""};
  for (std::size_t i = 0; i < messages.size(); ++i)
    out.messages.push_back(RequestMessage(messages[i], encoder, i, kept_keys));
  out.continued = TakeFinalAssistant(&out.messages, options.add_generation_prompt);
  if (out.messages.empty()) Fail(encoder, " encoding: no message precedes the assistant message to continue");
  if (Role(out.messages[0]) != "system") {
    OJson system = OJson::object();
    system["role"] = "system";
    system["content"] = "";
    out.messages.insert(out.messages.begin(), std::move(system));
  }
  if (options.tools.is_array() && !options.tools.empty()) {
    OJson tools = OJson::array();
    for (std::size_t i = 0; i < options.tools.size(); ++i) tools.push_back(RequestTool(options.tools[i], encoder, i));
    out.messages[0]["tools"] = std::move(tools);
  }
  return out;
}

}  // namespace fission::tokenizer::deepseek
